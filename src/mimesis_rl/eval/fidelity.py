"""Simulator fidelity against held-out real users.

For every real user turn of the held-out conversations, the simulator writes its own turn in the
same context (the real dialogue so far). Both are labelled by the same behaviour labeler and
compared (formulas in `fidelity_metrics`): behaviour fidelity overall and per domain, per-pattern
F1, Turing distance (discriminators cross-fitted over conversation folds, so every turn is scored
by one that never saw its conversation), the k-means JSD of MiniLM embeddings, first-turn
diversity, goal adherence, termination F1 and leave rates, role adherence, refusal rate, perplexity
of the real turns, and the Fidelity Index; the turn format's health (clean / repaired / rejected
after re-sampling / role breaks, from `UserSimulator.stats`); and the opening turns on their own
(their Turing distance and the openings that echo the opening cue). Turing distance and behaviour
fidelity carry 95% bootstrap intervals over conversations: with a few dozen held-out users,
differences inside them are noise.
Any schema-valid JSONL works: nothing here needs patterns or reasoning in the data.

This module selects the turns (`select`, `records_for`) and scores them (`score`, `summary_row`);
`fidelity_run` has the simulators write and the labeler label them, `fidelity_report` writes it up.
"""

from __future__ import annotations

import math
import random
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from mimesis_rl.data.schema import Conversation, GoalCard
from mimesis_rl.eval.fidelity_metrics import (
    behaviour_fidelity,
    binary_f1,
    cluster_jsd,
    distinct_n,
    fidelity_index,
    per_pattern_f1,
    perplexity_score,
    ratio_score,
    turing_distance,
)
from mimesis_rl.eval.fidelity_settings import FidelitySettings
from mimesis_rl.simulator.dialogue import turn_contexts
from mimesis_rl.simulator.discriminator import TurnDiscriminator
from mimesis_rl.simulator.format import OPENING_CUE, ParsedTurn
from mimesis_rl.simulator.rewards.goal import contradictions, slot_vocabulary
from mimesis_rl.simulator.roleplay import is_refusal, role_violations
from mimesis_rl.stats import conversation_bootstrap


@dataclass
class TurnRecord:
    """One real user turn and the simulator's turn in the same context."""

    conversation_id: str
    domain: str
    turn_index: int
    user_turn_number: int
    prompt: list[dict[str, str]]
    agent_message: str
    real_message: str
    real_reasoning: str | None
    real_ended: bool
    goal: GoalCard | None
    data_patterns: tuple[str, ...]
    simulated: ParsedTurn | None = None
    real_patterns: tuple[str, ...] = ()
    sim_patterns: tuple[str, ...] = ()
    # 1 / P(this turn is picked | its chat is): `select` always takes a chat's first and last turn,
    # so unweighted rates over-represent endings; weighted ones estimate a random turn's rate.
    design_weight: float = 1.0

    @property
    def sim_message(self) -> str:
        return self.simulated.message if self.simulated is not None else ""


def select(conversations: Sequence[Conversation],
           settings: FidelitySettings) -> list[tuple[Conversation, set[int]]]:
    """Conversations drawn at random (seeded), each with the user turns to simulate: its first and
    last (openings and leaving matter) and random others up to `turns_per_conversation`, until
    `max_turns` turns are covered. Long real chats thus spread the budget over many users."""
    rng = random.Random(settings.seed)
    order = [c for c in conversations if c.user_turns]
    rng.shuffle(order)
    if settings.max_conversations:
        order = order[: settings.max_conversations]
    chosen: list[tuple[Conversation, set[int]]] = []
    total = 0
    for conv in order:
        n = len(conv.user_turns)
        cap = settings.turns_per_conversation or n
        if settings.max_turns:
            cap = min(cap, settings.max_turns - total)
        if cap <= 0:
            break
        picked = {0, n - 1} if cap >= 2 else {0}
        middle = list(range(1, n - 1))
        rng.shuffle(middle)
        picked |= set(middle[: max(0, cap - len(picked))])
        chosen.append((conv, picked))
        total += len(picked)
    return chosen


def records_for(selection: Sequence[tuple[Conversation, set[int]]],
                max_behaviours: int = 4) -> list[TurnRecord]:
    out = []
    for conv, picked in selection:
        weights = design_weights(len(conv.user_turns), picked)
        for ctx in turn_contexts(conv, max_behaviours):
            if ctx.user_turn_number not in picked:
                continue
            out.append(TurnRecord(
                conversation_id=ctx.conversation_id, domain=ctx.domain, turn_index=ctx.turn_index,
                user_turn_number=ctx.user_turn_number, prompt=ctx.prompt,
                agent_message=ctx.agent_message or "",
                real_message=ctx.real.content, real_reasoning=ctx.real.reasoning, real_ended=ctx.ended,
                goal=ctx.goal, data_patterns=tuple(ctx.real.patterns),
                design_weight=weights[ctx.user_turn_number]))
    return out


def design_weights(n: int, picked: set[int]) -> dict[int, float]:
    """Inverse inclusion probabilities of `select`'s picks in a chat of `n` user turns: the first
    and the last turn are always taken (weight 1), the middle ones at random (weight
    middle turns / middle turns picked). A chat whose middle turns got no pick (a small
    `turns_per_conversation`) adds only its ends, so its middle is missing from the estimate."""
    middle = [i for i in picked if 0 < i < n - 1]
    return {i: (n - 2) / len(middle) if i in middle else 1.0 for i in picked}


def weighted_rate(flags: Sequence[bool], weights: Sequence[float]) -> float:
    total = float(sum(weights))
    return float(sum(w for f, w in zip(flags, weights, strict=True) if f) / total) if total else 0.0


def _embed(texts: list[str], kind: str, seed: int) -> np.ndarray:
    if kind == "minilm":
        from mimesis_rl.simulator.embeddings import encode

        return encode(texts)
    if kind != "hashing":
        raise ValueError(f"sim_eval.fidelity.embedding {kind!r}: use `minilm` or `hashing`")
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import HashingVectorizer

    matrix = HashingVectorizer(analyzer="char_wb", ngram_range=(2, 4), n_features=2**12,
                               alternate_sign=False).transform(texts)
    dims = max(2, min(32, matrix.shape[0] - 1, matrix.shape[1] - 1))
    return TruncatedSVD(n_components=dims, random_state=seed).fit_transform(matrix)


def turing(records: list[TurnRecord], features: str, seed: int = 0, folds: int = 5,
           resamples: int = 300) -> dict[str, Any]:
    """Cross-fitted real-vs-simulated AUC: conversations go to `folds` groups; each group is scored
    by a discriminator fitted on the others, so every turn is scored once and never by a model that
    saw its conversation. The interval is a bootstrap over conversations of the pooled scores."""
    ids = sorted({r.conversation_id for r in records})
    random.Random(seed).shuffle(ids)
    k = min(folds, len(ids))
    if k < 2:
        return {"auc": None, "turing_distance": None, "turing_distance_ci": None,
                "opening_turing_distance": None, "opening_turing_distance_ci": None}
    fold_of = {cid: i % k for i, cid in enumerate(ids)}
    rows = [(fold_of[r.conversation_id], r.conversation_id, r.agent_message, message, label)
            for r in records for message, label in ((r.real_message, 1), (r.sim_message, 0))]
    scores = np.zeros(len(rows))
    for fold in range(k):
        fit = [row for row in rows if row[0] != fold]
        held = [i for i, row in enumerate(rows) if row[0] == fold]
        disc = TurnDiscriminator(features=features, seed=seed).fit(
            [row[2] for row in fit], [row[3] for row in fit], [row[4] for row in fit])
        scores[held] = disc.predict_real([rows[i][2] for i in held], [rows[i][3] for i in held])
    labels = np.array([row[4] for row in rows])
    auc = float(roc_auc_score(labels, scores))
    interval = conversation_bootstrap(
        [row[1] for row in rows],
        lambda picked: turing_distance(float(roc_auc_score(labels[picked], scores[picked]))), seed, resamples,
        order=ids)
    out: dict[str, Any] = {"auc": auc, "turing_distance": turing_distance(auc),
                           "turing_distance_ci": interval}
    # Openings on their own: the same cross-fitted scores, restricted to first user turns (rows 2i, 2i+1).
    firsts = [i for i, r in enumerate(records) if r.user_turn_number == 0]
    opening = np.array([j for i in firsts for j in (2 * i, 2 * i + 1)], dtype=int)
    out["opening_turing_distance"] = out["opening_turing_distance_ci"] = None
    if len(opening) >= 4:
        o_labels, o_scores = labels[opening], scores[opening]
        out["opening_turing_distance"] = turing_distance(float(roc_auc_score(o_labels, o_scores)))
        o_ids = [rows[j][1] for j in opening]
        if len(set(o_ids)) >= 2:
            out["opening_turing_distance_ci"] = conversation_bootstrap(
                o_ids,
                lambda picked: turing_distance(float(roc_auc_score(o_labels[picked], o_scores[picked]))),
                seed, resamples)
    return out


# An opening that talks about the cue instead of answering it as a channel event: the cue's own
# text, or talk about "the conversation", "the chat", "the first message".
CUE_ECHO = re.compile(
    r"chat opened|\[chat|(?:the|this|our) (?:conversation|chat)\b|first message"
    r"|conversation (?:starts|started|begins)|(?:start|begin|open)(?:s|ing)? the (?:conversation|chat)",
    re.IGNORECASE)


def echoes_cue(message: str) -> bool:
    """Does a simulated opening repeat or riff on the opening cue (`OPENING_CUE`)?"""
    return bool(message) and (OPENING_CUE.lower() in message.lower() or bool(CUE_ECHO.search(message)))


def openings(records: list[TurnRecord]) -> dict[str, Any]:
    """The opening-turn row (besides its Turing distance, which `turing` computes)."""
    firsts = [r for r in records if r.user_turn_number == 0]
    sims = [r.sim_message for r in firsts]
    echoes = [m for m in sims if echoes_cue(m)]
    return {
        "opening_turns": len(firsts),
        "opening_cue_echoes": len(echoes),
        "opening_cue_echo_examples": echoes[:3],
        "opening_rejected": sum(1 for m in sims if not m.strip()),
        "opening_sim_mean_words": float(np.mean([len(m.split()) for m in sims])) if firsts else None,
        "opening_real_mean_words": float(np.mean([len(r.real_message.split()) for r in firsts]))
        if firsts else None,
        "opening_sim_leave_rate": float(np.mean([bool(r.simulated and r.simulated.ended) for r in firsts]))
        if firsts else None,
    }


def format_shares(stats: Any) -> dict[str, float]:
    """The turn-format headline of one simulator from its `ParseStats`: per sample, clean / repaired /
    rejected before re-sampling and role breaks; per turn, still unusable after re-sampling."""
    m = stats.as_metrics()
    return {"clean_share": m["parse.clean_rate"], "repaired_share": m["parse.repaired_rate"],
            "rejected_sample_share": m["parse.rejected_rate"],
            "rejected_after_resample_share": m["parse.failed_turn_rate"],
            "role_break_share": m["parse.role_break_rate"],
            "opening_leave_share": m["parse.opening_leave_rate"],
            "learned_leave_share": m["parse.learned_leave_rate"], "samples": m["parse.total"],
            "closed_at_budget_share": m["parse.closed_at_budget_turn_rate"],
            "sampled_turns": m["parse.turns"]}


def behaviour_interval(records: list[TurnRecord], seed: int = 0, resamples: int = 300) -> list[float]:
    """95% bootstrap interval (over conversations) of behaviour fidelity."""
    return conversation_bootstrap(
        [r.conversation_id for r in records],
        lambda picked: behaviour_fidelity([records[i].real_patterns for i in picked],
                                          [records[i].sim_patterns for i in picked]), seed, resamples)


def pattern_rates(real: Sequence[Sequence[str]],
                  simulated: Sequence[Sequence[str]]) -> dict[str, dict[str, float]]:
    """Share of turns showing each pattern, real and simulated (the report's distribution chart)."""
    from mimesis_rl.data.schema import PATTERN_NAMES

    def rates(labels: Sequence[Sequence[str]]) -> dict[str, float]:
        n = max(1, len(labels))
        return {p: sum(1 for names in labels if p in names) / n for p in PATTERN_NAMES}

    return {"real": rates(real), "simulated": rates(simulated)}


def score(records: list[TurnRecord], settings: FidelitySettings, simulator: Any = None) -> dict[str, Any]:
    """Every metric and the Fidelity Index for labelled, simulated records."""
    if not records:
        raise ValueError("no user turns to evaluate")
    real_labels = [r.real_patterns for r in records]
    sim_labels = [r.sim_patterns for r in records]
    metrics: dict[str, Any] = {"turns": len(records),
                               "conversations": len({r.conversation_id for r in records})}
    metrics["behaviour_fidelity"] = behaviour_fidelity(real_labels, sim_labels)
    metrics["behaviour_fidelity_ci"] = behaviour_interval(records, settings.seed)
    by_domain: dict[str, list[TurnRecord]] = defaultdict(list)
    for r in records:
        by_domain[r.domain].append(r)
    metrics["behaviour_fidelity_by_domain"] = {
        d: behaviour_fidelity([r.real_patterns for r in rs], [r.sim_patterns for r in rs])
        for d, rs in sorted(by_domain.items())}
    f1 = per_pattern_f1(real_labels, sim_labels)
    metrics["pattern_f1"] = f1
    present = [v for v in f1.values() if v is not None]
    metrics["pattern_macro_f1"] = float(np.mean(present)) if present else None
    metrics["pattern_rates"] = pattern_rates(real_labels, sim_labels)

    metrics.update(turing(records, settings.discriminator, settings.seed))
    metrics.update(openings(records))

    embeddings = _embed([r.real_message for r in records] + [r.sim_message or " " for r in records],
                        settings.embedding, settings.seed)
    metrics["cluster_jsd"] = cluster_jsd(embeddings[: len(records)], embeddings[len(records):],
                                         settings.clusters, settings.seed)

    firsts = [r for r in records if r.user_turn_number == 0]
    metrics["first_turn_distinct2_real"] = distinct_n([r.real_message for r in firsts])
    metrics["first_turn_distinct2_sim"] = distinct_n([r.sim_message for r in firsts])
    diversity = ratio_score(metrics["first_turn_distinct2_sim"], metrics["first_turn_distinct2_real"]) \
        if firsts else None

    vocabulary = slot_vocabulary(r.goal.slots for r in records if r.goal is not None)
    with_slots = [r for r in records if r.goal is not None and r.goal.slots]
    goal = (sum(1 for r in with_slots if not contradictions(r.sim_message, r.goal.slots, vocabulary))
            / len(with_slots)) if with_slots else None
    metrics["goal_adherence"] = goal

    real_ended = [r.real_ended for r in records]
    sim_ended = [bool(r.simulated and r.simulated.ended) for r in records]
    weights = [r.design_weight for r in records]
    metrics["termination_f1"] = binary_f1(real_ended, sim_ended)
    metrics["real_leave_rate"] = float(np.mean(real_ended))
    metrics["sim_leave_rate"] = float(np.mean(sim_ended))
    metrics["real_leave_rate_per_turn"] = weighted_rate(real_ended, weights)
    metrics["sim_leave_rate_per_turn"] = weighted_rate(sim_ended, weights)

    ok = [r for r in records if r.simulated is not None and r.simulated.ok]
    metrics["parse_reject_rate"] = 1.0 - len(ok) / len(records)
    metrics["role_adherence_rate"] = (sum(1 for r in ok if not role_violations(r.sim_message)) / len(records))
    metrics["refusal_rate"] = sum(1 for r in ok if is_refusal(r.sim_message)) / len(records)
    metrics["sim_mean_words"] = float(np.mean([len(r.sim_message.split()) for r in records]))
    metrics["real_mean_words"] = float(np.mean([len(r.real_message.split()) for r in records]))

    perplexity = None
    if simulator is not None and settings.perplexity_turns > 0:
        sample = records[: settings.perplexity_turns]
        nll = simulator.message_nll([r.prompt for r in sample], [r.real_message for r in sample],
                                    [r.real_reasoning for r in sample])
        tokens = sum(n for _, n in nll)
        if tokens:
            perplexity = math.exp(sum(v for v, _ in nll) / tokens)
    metrics["perplexity"] = perplexity
    vocab = len(simulator.tokenizer) if simulator is not None and simulator.tokenizer is not None else 0

    components = {
        "behaviour": metrics["behaviour_fidelity"],
        "turing": None if metrics["turing_distance"] is None else 1.0 - metrics["turing_distance"] / 100.0,
        "distribution": 1.0 - metrics["cluster_jsd"],
        "diversity": diversity,
        "goal": goal,
        "termination": metrics["termination_f1"],
        "role": metrics["role_adherence_rate"] * (1.0 - metrics["refusal_rate"]),
        "perplexity": perplexity_score(perplexity, vocab),
    }
    metrics["components"] = components
    metrics["fidelity_index"] = fidelity_index(components, settings.weights)
    return metrics


def examples(records: list[TurnRecord], n: int = 5, seed: int = 0) -> list[dict[str, Any]]:
    """A few context / real / simulated triples for the report."""
    sample = random.Random(seed).sample(records, min(n, len(records)))
    return [{"conversation_id": r.conversation_id, "domain": r.domain, "agent": r.agent_message,
             "real": r.real_message, "simulated": r.sim_message,
             "simulated_reasoning": r.simulated.reasoning if r.simulated else "",
             "real_patterns": list(r.real_patterns), "sim_patterns": list(r.sim_patterns)} for r in sample]


def metric_key(name: str) -> str:
    """An MLflow-safe key for a simulator name (`sft+rl` -> `sft_rl`)."""
    return re.sub(r"[^\w\-. /]", "_", name.replace("+", "_"))


def summary_row(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The scalar metrics of one simulator (what goes into MLflow and the metrics file)."""
    keys = ("fidelity_index", "behaviour_fidelity", "pattern_macro_f1", "turing_distance", "auc",
            "cluster_jsd", "first_turn_distinct2_sim", "first_turn_distinct2_real", "goal_adherence",
            "termination_f1", "real_leave_rate", "sim_leave_rate", "real_leave_rate_per_turn",
            "sim_leave_rate_per_turn", "learned_leave_share", "clean_share",
            "repaired_share", "closed_at_budget_share",
            "rejected_sample_share", "rejected_after_resample_share", "role_break_share",
            "opening_leave_share", "opening_turing_distance", "opening_turns", "opening_cue_echoes",
            "opening_rejected",
            "opening_sim_mean_words", "opening_sim_leave_rate",
            "role_adherence_rate", "refusal_rate", "parse_reject_rate", "perplexity", "sim_mean_words",
            "real_mean_words", "turns", "conversations")
    row = {k: float(metrics[k]) for k in keys if metrics.get(k) is not None}
    for key in ("turing_distance_ci", "behaviour_fidelity_ci", "opening_turing_distance_ci"):
        if metrics.get(key):
            row[f"{key}_low"], row[f"{key}_high"] = (float(v) for v in metrics[key])
    decisions = metrics.get("decisions") or {}  # sim_eval.decision_items: agreement with the card
    row.update({k: float(decisions[k]) for k in ("decision_accuracy", "answer_rate")
                if decisions.get(k) is not None})
    return row
