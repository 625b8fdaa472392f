"""The environment part's detectors on written user turns and transcripts: goal-slot contradictions,
the want being stated, verbatim repetition, reasoning share and invalid-turn endings."""

from __future__ import annotations

import pytest

from mimesis_rl.envs.protocols import UserReply
from mimesis_rl.envs.registry import make_env
from mimesis_rl.eval.environment_metrics import (
    aggregate,
    measure_dialogue,
    turns_until_want,
    verbatim_runs,
    want_stated,
)
from mimesis_rl.eval.environment_settings import EnvironmentSettings
from mimesis_rl.eval.fidelity import echoes_cue
from mimesis_rl.simulator.consistency import goal_contradictions


def _goal(domain: str, seed: int = 0):
    return make_env(domain).reset(seed).goal


# shopping seed 0: a sporty jacket (may switch to rugged), budget $91 (private).
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Hi, I'm looking for a sporty jacket.", []),
        ("Actually a rugged one would be better.", []),  # a listed change of mind
        ("I want a classic jacket, nothing fancy.", ["style"]),
        ("I'd like some headphones please.", ["category"]),
        ("My budget is 91 dollars.", []),
        ("My budget is 250 dollars.", ["budget"]),
        ("I can spend $150 at most.", ["budget"]),
        ("I don't want a classic look.", []),  # negated: not a claim
        ("", []),
    ],
)
def test_shopping_contradictions(message: str, expected: list[str]) -> None:
    assert goal_contradictions(message, _goal("shopping"), "shopping") == expected


def test_other_domains_contradictions() -> None:
    bargain = _goal("bargain")  # kayak, reservation 524
    assert goal_contradictions("I can pay at most 700 for the kayak.", bargain, "bargain") == ["reservation"]
    assert goal_contradictions("My max is 400, take it or leave it.", bargain, "bargain") == []  # a bluff
    returns = _goal("returns")  # order A6681, hair dryer, opened, 44 days
    assert goal_contradictions("It's order A6681.", returns, "returns") == []
    assert goal_contradictions("It's order A1234.", returns, "returns") == ["order"]
    assert goal_contradictions("I got it 10 days ago.", returns, "returns") == ["days"]
    campsite = _goal("campsite")  # firewood High
    assert goal_contradictions("We need firewood the most.", campsite, "campsite") == []
    assert goal_contradictions("Water is our top priority.", campsite, "campsite") == ["high"]
    assert goal_contradictions("Water is not our top priority.", campsite, "campsite") == []
    travel = _goal("travel")  # restaurant, 2 people, wednesday, thai (or indian), east, moderate
    assert goal_contradictions("A table for 2 people on wednesday, thai food.", travel, "travel") == []
    assert goal_contradictions("A table for 5 people on friday.", travel, "travel") == ["day", "people"]


def test_want_stated_and_turns_until_want() -> None:
    goal = _goal("shopping")
    assert not want_stated("Hello there, how are you?", goal, "shopping")
    assert want_stated("I'm after a new jacket", goal, "shopping")
    assert want_stated("I need a new coat for winter", goal, "shopping")
    messages = ["hey", "How does the user feel about her budget?", "a sporty jacket please"]
    assert turns_until_want(messages, goal, "shopping") == 3
    assert turns_until_want(["hey", "hmm"], goal, "shopping") is None
    assert want_stated("My internet keeps dropping", _goal("support"), "support")
    assert want_stated("I'd like to return something", _goal("returns"), "returns")
    assert not want_stated("I want to change the topic, so I'll write my first message", goal, "shopping")


def test_verbatim_runs() -> None:
    assert verbatim_runs(["a", "b", "c"]) == 0
    assert verbatim_runs(["ok", "ok"]) == 0
    assert verbatim_runs(["ok", "OK ", "ok"]) == 1  # case and spacing do not make a turn new
    assert verbatim_runs(["x", "x", "x", "x"]) == 2  # the 3rd and the 4th
    assert verbatim_runs(["x", "x", "y", "x", "x"]) == 0
    assert verbatim_runs(["", "", ""]) == 0  # empty turns are not repetition (they are flagged elsewhere)
    assert verbatim_runs(["x", "x"], run=2) == 1


def test_echoes_cue() -> None:
    assert echoes_cue("[chat opened] hi")
    assert echoes_cue("The conversation starts. Hi!")
    assert echoes_cue("I want to change the topic, so I'll write my first message")
    assert not echoes_cue("hi, I need a jacket")
    assert not echoes_cue("")


def _transcript(replies: list[UserReply], seed: int = 0):
    """A shopping episode played by hand: the agent asks, the user answers with `replies`."""
    env = make_env("shopping", max_turns=len(replies) + 1)
    state = env.reset(seed)
    env.user_turn(state, replies[0])
    for reply in replies[1:]:
        if state.done:
            break
        env.step(state, "What is your budget?")
        env.user_turn(state, reply)
    return state


def test_measure_dialogue_on_a_written_transcript() -> None:
    bad = _transcript([
        UserReply("I want to change the topic, so I'll write my first message", reasoning=""),
        UserReply("My budget is 300.", reasoning="say something"),
        UserReply("fine", reasoning="meh"),
        UserReply("fine", reasoning="meh"),
        UserReply("fine", reasoning="meh"),
        UserReply("", reasoning="", ended=True, meta={"end_reason": "invalid_turn:role_break:assistant"}),
    ])
    m = measure_dialogue(bad)
    assert m.user_turns == 5  # the invalid ending never reached the agent
    assert m.contradicting_turns == 1 and m.contradicted_slots == ["budget"]
    assert m.want_turn is None and m.repeats == 1 and m.with_reasoning == 4
    assert m.invalid_end == "invalid_turn:role_break:assistant" and not m.success

    good = _transcript([UserReply("Hi, I need a sporty jacket.", reasoning="start with the item"),
                        UserReply("Around 91 dollars is my budget.", reasoning="they asked")])
    g = measure_dialogue(good)
    assert g.want_turn == 1 and g.contradicting_turns == 0 and g.repeats == 0 and g.with_reasoning == 2

    row = aggregate([m, g])
    assert row["dialogues"] == 2 and row["user_turns"] == 7
    assert row["contradiction_rate"] == pytest.approx(1 / 7)
    assert row["turns_to_want"] == 1.0 and row["want_never_share"] == 0.5
    assert row["verbatim_repeats"] == 1 and row["repeat_dialogue_share"] == 0.5
    assert row["reasoning_share"] == pytest.approx(6 / 7)
    assert row["invalid_end_share"] == 0.5


def test_settings_are_checked() -> None:
    assert EnvironmentSettings(dialogues=3, first_seed=5).seeds == [5, 6, 7]
    assert len(EnvironmentSettings().domain_names()) == 8
    with pytest.raises(ValueError, match="unknown"):
        EnvironmentSettings(domains=["shopping", "moon"])
    with pytest.raises(ValueError, match="dialogues"):
        EnvironmentSettings(dialogues=0)


def test_one_batch_over_all_domains_plays_the_same_dialogues() -> None:
    """`batch: all` (one lockstep run over the 8 domains) and `batch: domain` give the same rows:
    batching changes the cost, never the dialogues (scripted users here, so no model is needed)."""
    from mimesis_rl.eval.environment_metrics import REFERENCE
    from mimesis_rl.eval.environment_run import run_environment

    runs = {b: run_environment({}, EnvironmentSettings(dialogues=2, max_turns=4, first_seed=5, batch=b))
            for b in ("all", "domain")}
    assert runs["all"].rows == runs["domain"].rows
    rows = runs["all"].rows[REFERENCE]
    assert len(rows) == 8 and all(row["dialogues"] == 2 for row in rows.values())
    assert runs["all"].overall[REFERENCE]["success_rate"] > 0.9  # the reference the issue compares against
    # Decisions met inside the dialogues, against the card user's: the cooperative reference mostly
    # agrees (it anchors on a first offer at its very limit); shopping's recommendation ends the
    # dialogue, so there is no reply to a proposal to read there.
    overall = runs["all"].overall[REFERENCE]
    assert overall["card_decisions"] >= 4 and overall["card_agreement"] >= 0.75
    assert rows["bargain"]["card_decisions"] >= 1 and "card_decisions" not in rows["shopping"]
    assert runs["all"].decisions[REFERENCE]["proposals"] == overall["card_decisions"]
    domains = [(r["env"], r["seed"]) for r in runs["all"].transcripts]
    assert domains == [(r["env"], r["seed"]) for r in runs["domain"].transcripts]


def test_shortfalls_name_what_misses_the_bar() -> None:
    from mimesis_rl.eval.environment_metrics import EnvironmentRun
    from mimesis_rl.eval.environment_report import shortfalls, verdict_lines

    run = EnvironmentRun(settings={"domains": ["shopping", "bargain"]})
    run.rows = {"reference": {"shopping": {"success_rate": 1.0}, "bargain": {"success_rate": 1.0}},
                "weak": {"shopping": {"success_ratio": 0.25}, "bargain": {"success_ratio": 1.0}},
                "good": {"shopping": {"success_ratio": 0.5}, "bargain": {"success_ratio": 1.0}}}
    run.overall = {"reference": {}, "weak": {"contradiction_rate": 0.08, "verbatim_repeats": 2,
                                             "reasoning_share": 0.5},
                   "good": {"contradiction_rate": 0.05, "verbatim_repeats": 0, "reasoning_share": 1.0}}
    short = shortfalls(run)
    assert short["good"] == []
    assert short["weak"] == ["success below half the reference's in shopping",
                             "contradictions on 8.0% of user turns", "2 verbatim triple repeat(s)",
                             "reasoning on 50% of user turns"]
    lines = verdict_lines(run)
    assert "- good: meets it" in lines and any(line.startswith("- weak: short:") for line in lines)
