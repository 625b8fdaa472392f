"""The template coach and the leak guard on written traces (no model)."""

from __future__ import annotations

import pytest

from mimesis_rl.agent.coach.base import clean_note
from mimesis_rl.agent.coach.context import contexts_from_record, contexts_from_trace
from mimesis_rl.agent.coach.factory import build_coach
from mimesis_rl.agent.coach.leaks import leaks, redact
from mimesis_rl.agent.coach.template import TemplateCoach
from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import TraceTurn

GOAL = GoalCard(
    text="Buy the kayak; pay at most $430.",
    slots={"item": "kayak", "list_price": 600, "reservation": 430},
    private=["reservation"],
)


def _trace(offer: float | None = 520) -> list[TraceTurn]:
    action = {"type": "offer", "price": offer} if offer is not None else None
    return [
        TraceTurn("user", "hi, is the kayak still for sale?", reasoning="I want it cheap"),
        TraceTurn("assistant", "Yes! What would you pay?", meta={}),
        TraceTurn(
            "user",
            "not sure yet, what's your price?",
            reasoning="I'd rather not say my budget",
            patterns=["withholding_info"],
        ),
        TraceTurn("assistant", "I can do 520.", meta={"action": action} if action else {}),
        TraceTurn(
            "user",
            "that's too expensive for me.",
            reasoning="430 is my limit, 520 is too much",
            patterns=["refusal", "negotiation"],
        ),
    ]


def test_contexts_read_the_following_user_turns():
    contexts = contexts_from_trace("bargain-7#0", "bargain", GOAL, _trace(), "user_left", horizon=1)
    assert [c.turn for c in contexts] == [0, 1]
    assert [t.content for t in contexts[0].later] == ["not sure yet, what's your price?"]
    assert contexts[0].ended_after is None and contexts[1].ended_after == "user_left"
    assert contexts[0].label("reservation") == "budget"  # the bargain domain's word for the slot


def test_template_notes_advise_without_leaking():
    contexts = contexts_from_trace("bargain-7#0", "bargain", GOAL, _trace(), "user_left", horizon=1)
    first, second = TemplateCoach().notes(contexts)
    assert "budget" in first and "ask" in first
    assert "above their hidden budget" in second and "come down" in second
    assert "leave" in second
    for note in (first, second):
        assert leaks(note, GOAL) == []
        assert len(note.split()) <= 40
    assert TemplateCoach().notes(contexts) == [first, second]  # deterministic


def test_template_direction_when_the_offer_is_below_the_budget():
    (_, second) = TemplateCoach().notes(contexts_from_trace("b", "bargain", GOAL, _trace(offer=300), None))
    assert "could go higher" in second


def test_reasoning_cues_stand_in_for_missing_patterns():
    trace = [
        TraceTurn("user", "hello"),
        TraceTurn("assistant", "hi"),
        TraceTurn("user", "ok", reasoning="I am getting really frustrated with this"),
    ]
    (note,) = TemplateCoach().notes(contexts_from_trace("e", "shopping", GOAL, trace, None))
    assert "acknowledge" in note.lower()


def test_leaks_and_redact():
    assert leaks("their limit is 430 dollars", GOAL) == ["reservation"]
    assert leaks("their limit is $430.", GOAL) == ["reservation"]
    assert leaks("offer 4300 or 1430", GOAL) == []
    assert leaks("the kayak is nice", GOAL) == []  # `item` is not private
    assert (
        redact("they will pay $430 at most", GOAL, {"reservation": "budget"})
        == "they will pay their budget at most"
    )
    words = GoalCard(text="t", slots={"condition": "Damaged box"}, private=["condition"])
    assert leaks("the damaged box matters", words) == ["condition"]
    assert leaks("damaged boxes", words) == []


def test_clean_note():
    assert clean_note("Coach note: <b>ask</b> about it\n\nmore") == "ask about it"
    assert len(clean_note("word " * 100).split()) == 40


def test_contexts_from_a_bad_record_name_the_episode():
    with pytest.raises(ValueError, match="episode 'x#0': not a transcript record"):
        contexts_from_record({"episode_id": "x#0", "domain": "bargain", "turns": [{"role": "user"}]})


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown backend 'oracle'"):
        build_coach("oracle")
    with pytest.raises(ValueError, match="needs the policy model"):
        build_coach("model")
