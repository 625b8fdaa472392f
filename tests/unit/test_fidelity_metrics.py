"""The fidelity metrics on written inputs with known answers, and the RL prompt mix."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.eval.fidelity_metrics import (
    behaviour_fidelity,
    binary_f1,
    cluster_jsd,
    distinct_n,
    fidelity_index,
    jsd,
    pattern_histogram,
    per_pattern_f1,
    perplexity_score,
    ratio_score,
    turing_distance,
)
from mimesis_rl.simulator.rl_data import build_prompts, length_range


def test_jsd_bounds_and_symmetry() -> None:
    assert jsd([1, 2, 3], [2, 4, 6]) == pytest.approx(0.0)
    assert jsd([1, 0], [0, 1]) == pytest.approx(1.0)
    assert jsd([3, 1], [1, 3]) == pytest.approx(jsd([1, 3], [3, 1]))
    assert 0 < jsd([3, 1], [1, 3]) < 1


def test_behaviour_fidelity_counts_turns_without_patterns() -> None:
    real = [("refusal",), (), ("negotiation", "refusal")]
    assert pattern_histogram(real)[-1] == 1  # the "(none)" bucket
    assert behaviour_fidelity(real, real) == pytest.approx(1.0)
    assistant_like = [(), (), ()]
    close = [("refusal",), (), ("negotiation",)]
    assert behaviour_fidelity(real, close) > behaviour_fidelity(real, assistant_like)


def test_per_pattern_and_termination_f1() -> None:
    f1 = per_pattern_f1([("refusal",), ("refusal",), ()], [("refusal",), (), ("refusal",)])
    assert f1["refusal"] == pytest.approx(0.5)
    assert f1["negotiation"] is None
    assert binary_f1([True, False, True], [True, False, False]) == pytest.approx(2 / 3)
    assert binary_f1([False], [False]) is None


def test_turing_distance_diversity_perplexity_and_index() -> None:
    assert turing_distance(0.5) == 0 and turing_distance(1.0) == 100 and turing_distance(0.0) == 100
    assert distinct_n(["a b c", "a b d"]) == pytest.approx(3 / 4)
    assert ratio_score(0.5, 1.0) == ratio_score(1.0, 0.5) == pytest.approx(0.5)
    assert perplexity_score(1.0, 100) == 1.0 and perplexity_score(100.0, 100) == pytest.approx(0.0)
    assert fidelity_index({"behaviour": 1.0, "turing": 0.0, "goal": None}, {"behaviour": 1, "turing": 1,
                                                                           "goal": 5}) == pytest.approx(50.0)
    with pytest.raises(ValueError, match="unknown component"):
        fidelity_index({}, {"charm": 1.0})


def test_cluster_jsd_separates_disjoint_clouds() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(0, 0.1, (40, 4))
    b = rng.normal(5, 0.1, (40, 4))
    assert cluster_jsd(a, a.copy(), k=4) == pytest.approx(0.0)
    assert cluster_jsd(a, b, k=4) == pytest.approx(1.0)


def test_rl_prompts_mix_corpus_contexts_and_environment_goal_cards(fixtures_dir: Path) -> None:
    conversations = read_conversations(fixtures_dir / "sim" / "conversations.jsonl")
    rows = build_prompts(conversations, corpus_per_domain=3, env_per_domain=2,
                         env_domains=["shopping", "bargain"])
    corpus = [r for r in rows if r["source"] == "corpus"]
    env = [r for r in rows if r["source"] == "env"]
    assert {r["domain"] for r in corpus} == {"shopping", "campsite", "chitchat", "support"}
    assert all(sum(r["domain"] == d for r in corpus) <= 3 for d in {r["domain"] for r in corpus})
    assert sorted(r["domain"] for r in env) == ["bargain", "bargain", "shopping", "shopping"]
    assert all(r["real_patterns"] is None and r["user_turn_number"] == 0 for r in env)
    assert all(json.loads(r["private_slots"]) for r in env)  # both domains keep something private
    later = [r for r in corpus if r["user_turn_number"] > 0]
    assert all(r["prompt"][-1]["role"] == "user" and r["agent_message"] for r in later)
    lo, hi = length_range(conversations)
    assert 1 <= lo < hi


def test_selection_spreads_the_turn_budget_over_conversations(fixtures_dir: Path) -> None:
    from mimesis_rl.eval.fidelity import records_for, select
    from mimesis_rl.eval.fidelity_settings import FidelitySettings

    conversations = read_conversations(fixtures_dir / "sim" / "conversations.jsonl")
    selection = select(conversations, FidelitySettings(max_turns=10, turns_per_conversation=2))
    assert len(selection) == 5 and sum(len(p) for _, p in selection) == 10
    for conv, picked in selection:
        assert picked == {0, len(conv.user_turns) - 1}  # its opening and its last turn
    records = records_for(selection)
    assert len(records) == 10 and sum(r.real_ended for r in records) >= 1
    everything = select(conversations, FidelitySettings(max_turns=None, turns_per_conversation=None))
    assert sum(len(p) for _, p in everything) == sum(len(c.user_turns) for c in conversations)


def test_design_weights_turn_an_ending_enriched_sample_into_a_per_turn_rate() -> None:
    from mimesis_rl.eval.fidelity import design_weights, weighted_rate

    # 6 user turns, the first, the last and one of the 4 middle ones picked: that one stands for 4.
    weights = design_weights(6, {0, 2, 5})
    assert weights == {0: 1.0, 2: 4.0, 5: 1.0} and sum(weights.values()) == 6
    assert design_weights(3, {0, 1, 2}) == {0: 1.0, 1: 1.0, 2: 1.0}
    # The user leaves on its last turn only: 1 of 3 sampled turns, 1 of 6 turns of the chat.
    flags = [False, False, True]
    assert weighted_rate(flags, [weights[i] for i in (0, 2, 5)]) == pytest.approx(1 / 6)
    assert weighted_rate([], []) == 0.0
