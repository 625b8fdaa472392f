"""The simulator curve's measures on scripted users: the card user agrees with its own card, a user
that never accepts agrees only where the card turns the proposal down, and the items are fixed."""

from __future__ import annotations

import pytest

from mimesis_rl.envs.multi import PerDomainUser
from mimesis_rl.envs.registry import DOMAINS, scripted_user
from mimesis_rl.envs.scripted.knobs import Knobs
from mimesis_rl.simulator.curve import CurveSettings, decision_point, env_point, held_out_items
from mimesis_rl.simulator.decisions import CARD_KNOBS


def card_users(knobs: Knobs = CARD_KNOBS) -> PerDomainUser:
    """One UserSide for every domain, as the runtime is: a scripted user per domain behind it."""
    return PerDomainUser({d: scripted_user(d, knobs=knobs, name="card") for d in DOMAINS}, "per-domain")


def test_held_out_items_are_fixed_and_cover_both_decisions_and_questions() -> None:
    items = held_out_items(8)
    assert items == held_out_items(8)
    proposals = [i for i in items if i.kind != "question"]
    assert {i.domain for i in proposals} == {"bargain", "campsite", "travel", "content"}
    assert {i.expected_accept for i in proposals} == {True, False}
    assert len({i.domain for i in items if i.kind == "question"}) >= 6
    assert held_out_items(0) == []


def test_many_held_out_proposals_stay_even_between_the_cards_decisions() -> None:
    """An episode holds one proposal its card turns down, so 96 asks for more episodes than 24: four
    episodes gave 24 accepts to 16 declines, and the gap's declining side was the thinner one."""
    proposing = ["bargain", "campsite", "travel", "content"]
    small = [i for i in held_out_items(24, proposing) if i.kind != "question"]
    assert sum(i.expected_accept for i in small) == sum(not i.expected_accept for i in small) == 12
    many = [i for i in held_out_items(96, proposing) if i.kind != "question"]
    assert sum(i.expected_accept for i in many) == sum(not i.expected_accept for i in many) == 48
    assert {i.domain for i in many if not i.expected_accept} == set(proposing)


def test_the_card_user_agrees_with_its_card_and_answers() -> None:
    items = held_out_items(4, ["bargain", "content"])
    point = decision_point(card_users(), items)
    assert point == {"decision_accuracy": 1.0, "decision_gap": 1.0, "answers_accuracy": 1.0}
    refusing = decision_point(card_users(CARD_KNOBS.with_(toughness=1.0, cooperativeness=0.0)), items)
    assert refusing["decision_accuracy"] < 1.0 and refusing["answers_accuracy"] == 0.0
    assert 0.0 <= refusing["decision_gap"] < 1.0  # it declines some of what its card accepts


def test_the_gap_needs_both_card_decisions() -> None:
    accepting = [i for i in held_out_items(4, ["bargain"]) if i.expected_accept]
    assert accepting and set(decision_point(card_users(), accepting)) == {"decision_accuracy"}


def test_environment_point_is_the_scripted_agents_success_rate() -> None:
    point = env_point(card_users(), 1, ["bargain", "travel"])
    assert point == {"env_success_rate": 1.0}  # the scripted agent closes with the card user
    refusing = card_users(CARD_KNOBS.with_(toughness=1.0, cooperativeness=0.0))
    split = env_point(refusing, 2, ["bargain", "travel"], per_domain=True)
    assert set(split) == {"env_success_rate", "env_success.bargain", "env_success.travel"}
    assert split["env_success_rate"] == (split["env_success.bargain"] + split["env_success.travel"]) / 2
    with pytest.raises(ValueError, match="fractions"):
        CurveSettings(fractions=[1.5])
