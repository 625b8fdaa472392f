"""The repetition rule, the cue detectors and the goal-card reading shared by all reasoning backends."""

from __future__ import annotations

import pytest

from mimesis_rl.behavior.reasoning.base import clean_trace, fallback_category
from mimesis_rl.behavior.reasoning.checks import (
    repeats_message,
    repetition_problem,
    token_overlap,
    voice_problem,
)
from mimesis_rl.behavior.reasoning.config import RationalizeSettings
from mimesis_rl.behavior.reasoning.context import first_person, goal_reasons, last_question, slot_phrase
from mimesis_rl.behavior.reasoning.metrics import distinct_ngram_ratio
from mimesis_rl.data.schema import GoalCard

MESSAGE = "I need two firewood packages because it rains a lot where I camp."


@pytest.mark.parametrize(("trace", "expected"), [
    (None, "empty"),
    ("   ", "empty"),
    ("...", "no words"),
    ("i need TWO firewood packages, because it rains a lot where i camp", "equal to the message"),
    ("two firewood packages", "a substring of the message"),
    (f'I said "{MESSAGE}"', "mostly the message quoted"),
    ("Firewood packages: I need two because it rains where I camp a lot!", "token overlap"),
])
def test_repetitions_are_rejected_with_a_reason(trace, expected):
    problem = repetition_problem(trace, MESSAGE)
    assert problem is not None and problem.startswith(expected)
    assert repeats_message(trace, MESSAGE)


def test_a_real_trace_passes_even_when_it_quotes_a_short_message():
    assert repetition_problem("They asked about my plans; I only say 'ok'.", "ok") is None
    assert repetition_problem("The weather scares me, so wood is what I want most.", MESSAGE) is None
    assert token_overlap("The weather scares me, so wood is what I want most.", MESSAGE) < 0.3


def test_overlap_threshold_is_a_knob():
    trace = "Firewood matters because rain soaks everything where I camp."
    loose, strict = repetition_problem(trace, MESSAGE, 0.9), repetition_problem(trace, MESSAGE, 0.2)
    assert loose is None and strict is not None


def test_model_preambles_and_prompt_echoes_are_cut():
    raw = "The user's private reasoning for this message is: I want it cheap. The user's message: \"hi\""
    assert clean_trace(raw) == "I want it cheap."
    assert clean_trace("The user's goal: You want a hotel.") == ""


@pytest.mark.parametrize(("trace", "problem"), [
    ("I can't afford that, so I stall.", None),
    ("They offered too little; my kids need more food.", None),
    ("The price is too high and stalling helps.", "not first person"),
    ("I think the user wants a cheaper room.", "talks about the user"),
    ("I'm sorry for any confusion, as an AI I can't book rooms.", "speaks as the assistant"),
])
def test_voice_of_the_user(trace, problem):
    assert voice_problem(trace) == problem


def test_clean_trace_and_fallback_categories():
    assert clean_trace('<think>"I want the cheap one."</think>\n\nUser: hi') == "I want the cheap one."
    assert clean_trace(None) == ""
    assert fallback_category("empty") == "empty"
    assert fallback_category("too short (1 words < 3)") == "too_short"
    assert fallback_category("talks about the user") == "off_voice"
    assert fallback_category("token overlap 0.90 > 0.70") == "repeats_message"


def test_last_question_skips_lead_ins_and_statements():
    assert last_question("Sure! What is your budget? I can help.") == "What is your budget?"
    assert last_question("So, where are you going?") == "where are you going?"
    assert last_question("Great choice.") is None
    assert last_question(None) is None


def test_reasons_from_the_casino_adapter_shape_resolve_to_items():
    goal = GoalCard(text="t", slots={"priority_high": "Firewood", "reason_high": "It rains.",
                                     "priority_low": "Water", "reason_low": "There is a lake."},
                    private=["priority_high", "reason_high"])
    reasons = {r.key: r for r in goal_reasons(goal)}
    assert reasons["high"].item == "Firewood" and reasons["high"].text == "It rains."
    assert reasons["low"].item == "Water"


@pytest.mark.parametrize("slots", [
    {"priorities": {"High": "Food"}, "reasons": {"High": "Big family."}},
    {"priorities": {"Food": "High"}, "reasons": {"High": "Big family."}},
    {"reasons": {"Food": "Big family."}},
    {"priority_food": "high", "reason_food": "Big family."},
])
def test_reason_shapes_resolve_to_the_item(slots):
    [reason] = goal_reasons(GoalCard(text="t", slots=slots))
    assert reason.item == "Food" or reason.item == "food"
    assert reason.text == "Big family."


def test_list_reasons_have_no_item_and_plain_slots_are_not_reasons():
    goal = GoalCard(text="t", slots={"why": ["I want to stay fit", ""], "budget": 200})
    reasons = goal_reasons(goal)
    assert [(r.item, r.text) for r in reasons] == [(None, "I want to stay fit")]
    assert goal_reasons(None) == []


def test_wording_helpers():
    assert slot_phrase("priority_high") == "high priority"
    assert slot_phrase("max_price") == "max price"
    assert first_person("You want a quiet hotel for your family.") == "I want a quiet hotel for my family."
    assert first_person("Firewood matters most to you.") == "firewood matters most to me."


def test_distinct_ngram_ratio():
    assert distinct_ngram_ratio(["a b c d", "a b c d"]) == 0.5
    assert distinct_ngram_ratio(["a b"]) == 0.0


def test_config_rejects_unknown_keys_and_backends():
    assert RationalizeSettings.from_params({}).backend == "template"
    with pytest.raises(ValueError, match="rationalize.model.*unknown key"):
        RationalizeSettings.from_params({"rationalize": {"model": {"pth": "x"}}})
    with pytest.raises(ValueError, match="backend"):
        RationalizeSettings.from_params({"rationalize": {"backend": "magic"}})
