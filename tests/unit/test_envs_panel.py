"""The simulator panel: roles, at least nine unseen members, never a training simulator among them."""

from __future__ import annotations

import pytest

from mimesis_rl.envs import specs
from mimesis_rl.envs.base import UserSide
from mimesis_rl.envs.panel import DEFAULT_MEMBERS, PERSONAS, Panel, PanelError, PanelMember, default_panel
from mimesis_rl.envs.scripted.knobs import PRESETS
from mimesis_rl.envs.specs import UnsupportedSpec, make_agent, make_user


@pytest.fixture(autouse=True)
def no_model_resolvers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start from the envs package alone: other tests may have imported layers that register resolvers."""
    monkeypatch.setattr(specs, "_USER_RESOLVERS", {})
    monkeypatch.setattr(specs, "_AGENT_RESOLVERS", {})


def test_default_panel_has_nine_unseen_disjoint_from_training() -> None:
    panel = default_panel()
    unseen, train = panel.by_role("unseen"), panel.by_role("train")
    assert len(unseen) >= 9
    assert len(panel.available("unseen")) >= 9  # scripted ones need no model
    assert {m.name for m in unseen}.isdisjoint(m.name for m in train)
    assert {m.spec for m in unseen}.isdisjoint(m.spec for m in train)
    scripted_train = {m.spec.split(":", 1)[1] for m in train if m.kind == "scripted"}
    for member in unseen:
        if member.kind == "scripted":
            knobs = PRESETS[member.spec.split(":", 1)[1]]
            assert all(knobs != PRESETS[name] for name in scripted_train), member.name
    assert {m.kind for m in unseen} == {"scripted", "prompted", "learned"}
    assert {m.role for m in panel.members} == {"train", "unseen", "baseline"}


def test_a_training_simulator_in_the_unseen_set_is_refused() -> None:
    leak = PanelMember(
        "sneaky", "unseen", "learned:models:/mimesis-simulator@champion", "the training simulator"
    )
    with pytest.raises(PanelError, match="training simulators in the unseen set: sneaky"):
        Panel((*DEFAULT_MEMBERS, leak))


def test_a_renamed_training_preset_is_still_refused() -> None:
    """Same knobs under another name is the same simulator."""
    PRESETS["cooperative_copy"] = PRESETS["cooperative"]
    try:
        leak = PanelMember("looks-new", "unseen", "scripted:cooperative_copy", "")
        with pytest.raises(PanelError, match="looks-new"):
            Panel((*DEFAULT_MEMBERS, leak))
    finally:
        del PRESETS["cooperative_copy"]


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (PanelMember("scripted-terse", "unseen", "scripted:terse", ""), "duplicate panel names"),
        (PanelMember("x", "judge", "scripted:terse", ""), "role must be one of"),  # type: ignore[arg-type]
        (PanelMember("x", "unseen", "scripted:nope", ""), "unknown scripted preset"),
        (PanelMember("x", "unseen", "prompted:pirate", ""), "unknown persona"),
        (PanelMember("x", "unseen", "telepathic:bob", ""), "bad user spec"),
    ],
)
def test_bad_members_are_refused(member: PanelMember, message: str) -> None:
    with pytest.raises((PanelError, ValueError), match=message):
        Panel((*DEFAULT_MEMBERS, member))


def test_too_few_unseen_members_are_refused() -> None:
    with pytest.raises(PanelError, match="at least 9"):
        Panel(tuple(m for m in DEFAULT_MEMBERS if m.role != "unseen"))


def test_scripted_members_build_and_model_members_wait_for_a_resolver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    panel = default_panel()
    user = panel.build("scripted-withholding", "returns")
    assert isinstance(user, UserSide)
    with pytest.raises(UnsupportedSpec, match="needs a 'prompted' resolver"):
        panel.build("prompted-busy-parent", "returns")
    with pytest.raises(KeyError, match="no panel member 'nobody'"):
        panel.member("nobody")

    built: list[tuple[str, str]] = []

    def resolver(body: str, domain: str) -> UserSide:
        built.append((body, domain))
        return make_user("scripted:emotional", domain)  # stands in for a prompted-LLM user

    specs.register_user_resolver("prompted", resolver)
    assert isinstance(panel.build("prompted-busy-parent", "returns"), UserSide)
    assert built == [("busy_parent", "returns")]
    assert {m.name for m in panel.available("unseen")} >= {
        f"prompted-{p.replace('_', '-')}" for p in PERSONAS if p != "assistant"
    }
    with pytest.raises(ValueError, match="'prompted' or 'learned'"):
        specs.register_user_resolver("scripted", resolver)


def test_agent_specs() -> None:
    assert make_agent("scripted", "shopping").name == "scripted:shopping"
    assert make_agent("scripted:never_act", "shopping").name == "scripted:never_act"
    with pytest.raises(UnsupportedSpec, match="needs a model resolver"):
        make_agent("models:/mimesis-agent@champion", "shopping")
    with pytest.raises(ValueError, match="bad agent spec"):
        make_agent("gpt-17", "shopping")
    with pytest.raises(KeyError, match="unknown scripted agent 'genius'"):
        make_agent("scripted:genius", "shopping")
