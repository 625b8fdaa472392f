"""Cross-fitted Turing distance and the bootstrap intervals, on written turns with known answers."""

from __future__ import annotations

import random

from mimesis_rl.eval.fidelity import TurnRecord, behaviour_interval, turing
from mimesis_rl.eval.fidelity_report import table, verdict
from mimesis_rl.simulator.format import ParsedTurn

CASUAL = ["lol yeah me too", "idk maybe later", "nah not really", "ya its fine i guess", "haha true",
          "hmm dunno", "ok cool", "wait what", "sure thing", "eh whatever works"]
ASSISTANT = ["Certainly! Here are some options you might consider:\n1. Option A\n2. Option B",
             "As an AI language model, I would be happy to help you with that request.",
             "Great question! There are several factors to consider. First, think about your budget."]


def records(sim_pool: list[str], n_conversations: int = 30, seed: int = 0) -> list[TurnRecord]:
    rng = random.Random(seed)
    out = []
    for c in range(n_conversations):
        for t in range(3):
            out.append(TurnRecord(
                conversation_id=f"c{c}", domain="chitchat", turn_index=2 * t + 1, user_turn_number=t,
                prompt=[], agent_message="how was your day?", real_message=rng.choice(CASUAL),
                real_reasoning=None, real_ended=False, goal=None, data_patterns=(),
                simulated=ParsedTurn(reasoning="r", message=rng.choice(sim_pool), ended=False),
                real_patterns=("emotional_expression",) if t == 0 else (),
                sim_patterns=("emotional_expression",) if t == 0 else ()))
    return out


def test_turing_distance_separates_assistant_style_from_casual_users() -> None:
    obvious = turing(records(ASSISTANT), "cheap")
    alike = turing(records(CASUAL, seed=1), "cheap")
    assert obvious["turing_distance"] > 90
    assert alike["turing_distance"] < obvious["turing_distance"]
    low, high = alike["turing_distance_ci"]
    assert low <= alike["turing_distance"] <= high
    assert obvious["turing_distance_ci"][0] > alike["turing_distance_ci"][0]


def test_turing_needs_two_conversations() -> None:
    assert turing(records(ASSISTANT, n_conversations=1), "cheap")["turing_distance"] is None


def test_behaviour_interval_contains_estimate_and_report_marks_noise() -> None:
    recs = records(CASUAL)
    low, high = behaviour_interval(recs)
    assert low <= 1.0 and high == 1.0  # identical labels: every resample is identical
    results = {"assistant": {"turing_distance": 40.0, "turing_distance_ci": [30.0, 50.0],
                             "behaviour_fidelity": 0.90, "behaviour_fidelity_ci": [0.85, 0.95]},
               "sft+rl": {"turing_distance": 10.0, "turing_distance_ci": [2.0, 20.0],
                          "behaviour_fidelity": 0.92, "behaviour_fidelity_ci": [0.88, 0.96]}}
    lines = verdict(results)
    assert "better (95% intervals apart)" in lines[0]
    assert "within noise" in lines[1]
    assert "10.0 [2.0, 20.0]" in table(results)
