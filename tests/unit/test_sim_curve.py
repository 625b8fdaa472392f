"""The simulator curve's measures on scripted users: the card user agrees with its own card, a user
that never accepts agrees only where the card turns the proposal down, and the items are fixed."""

from __future__ import annotations

import pytest

from mimesis_rl.envs.registry import scripted_user
from mimesis_rl.simulator.curve import CurveSettings, decision_point, env_point, held_out_items
from mimesis_rl.simulator.decisions import CARD_KNOBS


class PerDomain:
    """One UserSide for every domain, as the runtime is: a scripted user per domain behind it."""

    name = "per-domain"

    def __init__(self, knobs=CARD_KNOBS) -> None:  # noqa: ANN001
        self.knobs, self.users = knobs, {}

    def _user(self, domain: str):  # noqa: ANN202
        return self.users.setdefault(domain, scripted_user(domain, knobs=self.knobs, name="card"))

    def start(self, specs):  # noqa: ANN001, ANN201
        return [(s.domain, self._user(s.domain).start([s])[0]) for s in specs]

    def opening(self, sessions):  # noqa: ANN001, ANN201
        return [self._user(d).opening([s])[0] for d, s in sessions]

    def respond(self, sessions, messages):  # noqa: ANN001, ANN201
        return [self._user(d).respond([s], [m])[0] for (d, s), m in zip(sessions, messages, strict=True)]


def test_held_out_items_are_fixed_and_cover_both_decisions_and_questions() -> None:
    items = held_out_items(8)
    assert items == held_out_items(8)
    proposals = [i for i in items if i.kind != "question"]
    assert {i.domain for i in proposals} == {"bargain", "campsite", "travel", "content"}
    assert {i.expected_accept for i in proposals} == {True, False}
    assert len({i.domain for i in items if i.kind == "question"}) >= 6
    assert held_out_items(0) == []


def test_the_card_user_agrees_with_its_card_and_answers() -> None:
    items = held_out_items(4, ["bargain", "content"])
    point = decision_point(PerDomain(), items)
    assert point == {"decision_accuracy": 1.0, "answers_accuracy": 1.0}
    refusing = decision_point(PerDomain(CARD_KNOBS.with_(toughness=1.0, cooperativeness=0.0)), items)
    assert refusing["decision_accuracy"] < 1.0 and refusing["answers_accuracy"] == 0.0


def test_environment_point_is_the_scripted_agents_success_rate() -> None:
    point = env_point(PerDomain(), 1, ["bargain", "travel"])
    assert point == {"env_success_rate": 1.0}  # the scripted agent closes with the card user
    refusing = PerDomain(CARD_KNOBS.with_(toughness=1.0, cooperativeness=0.0))
    split = env_point(refusing, 2, ["bargain", "travel"], per_domain=True)
    assert set(split) == {"env_success_rate", "env_success.bargain", "env_success.travel"}
    assert split["env_success_rate"] == (split["env_success.bargain"] + split["env_success.travel"]) / 2
    with pytest.raises(ValueError, match="fractions"):
        CurveSettings(fractions=[1.5])
