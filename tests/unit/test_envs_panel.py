"""The simulator panel: roles, at least nine unseen members, never a training simulator among them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mimesis_rl.envs import specs
from mimesis_rl.envs.panel import DEFAULT_MEMBERS, Panel, PanelError, PanelMember, default_panel
from mimesis_rl.envs.personas import PERSONAS
from mimesis_rl.envs.protocols import UserSide
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


# -- built or missing (issue 10) ------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def test_every_unseen_member_is_scripted_prompted_or_built_by_a_pipeline_stage() -> None:
    """≥ 9 unseen members, each buildable: scripted (pure Python), prompted (the base model stage), or
    learned with a `sim_panel@<key>` stage in dvc.yaml that writes exactly its folder."""
    import yaml

    panel = default_panel()
    unseen = panel.by_role("unseen")
    assert len(unseen) >= 9
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    panel_keys = set(params["sim_panel"]["members"])
    assert dvc["sim_panel"]["foreach"] == "${sim_panel.members}"
    assert dvc["sim_panel"]["do"]["outs"] == ["models/simulator/panel/${key}"]
    assert "base_model" in dvc
    for m in unseen:
        if m.kind == "learned":
            key = m.stage.split("@", 1)[1]
            assert m.stage == f"sim_panel@{key}" and key in panel_keys, m.name
            assert m.folder == f"models/simulator/panel/{key}", m.name
            assert m.spec == f"learned:models:/mimesis-simulator-{key}@candidate", m.name
        else:
            assert m.kind in ("scripted", "prompted"), m.name
    assert sum(1 for m in unseen if m.kind == "learned" and not m.optional) >= 2


def test_no_unseen_member_trains_an_agent() -> None:
    """The agent stages' training users (params) are never unseen members, and the learned unseen
    members register under their own names, never as the training `mimesis-simulator`."""
    import yaml

    panel = default_panel()
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    unseen_specs = {m.spec for m in panel.by_role("unseen")} | {
        f"learned:{m.folder}" for m in panel.by_role("unseen") if m.folder}
    training_users = set(params["agent_sft"]["users"]) | {
        v["user"] for v in params["agent_rl"]["variants"].values()}
    assert training_users and training_users.isdisjoint(unseen_specs)
    for m in panel.by_role("unseen"):
        if m.kind == "learned":
            assert "models:/mimesis-simulator@" not in m.spec


def test_member_status_tells_built_from_missing(tmp_path: Path) -> None:
    from mimesis_rl.envs.panel import member_status

    panel = default_panel()
    seed1, casino = panel.member("mimesis-simulator-seed1"), panel.member("mimesis-simulator-casino")
    st = member_status(panel.member("scripted-terse"), tmp_path)
    assert st.built and st.spec == "scripted:terse"
    st = member_status(panel.member("prompted-busy-parent"), tmp_path)
    assert st.state == "missing" and "models/base" in st.detail and "dvc repro base_model" in st.detail
    st = member_status(seed1, tmp_path)
    assert st.state == "missing" and "dvc repro sim_panel@seed1" in st.detail

    (tmp_path / "models" / "base").mkdir(parents=True)
    (tmp_path / "models" / "base" / "config.json").write_text("{}")
    assert member_status(panel.member("prompted-busy-parent"), tmp_path).built
    folder = tmp_path / "models" / "simulator" / "panel" / "seed1"
    folder.mkdir(parents=True)
    assert member_status(seed1, tmp_path).state == "missing"  # an empty folder is not built
    (folder / "mimesis.json").write_text("{}")
    st = member_status(seed1, tmp_path)
    assert st.built and st.spec == f"learned:{folder}"
    skipped = tmp_path / "models" / "simulator" / "panel" / "casino"
    skipped.mkdir(parents=True)
    (skipped / "skipped.json").write_text('{"reason": "CaSiNo not found at ../shared/data/casino"}')
    st = member_status(casino, tmp_path)
    assert st.state == "skipped" and "CaSiNo not found" in st.detail and not st.built
    states = {s.name: s.state for s in panel.status(tmp_path)}
    assert states["mimesis-simulator-heldout"] == "missing" and states["scripted-chaotic"] == "built"
