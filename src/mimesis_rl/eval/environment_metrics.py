"""What the environment part of `sim_eval` measures about a simulator as the user side of a task.

Detectors on single user turns (pure functions, tested on written transcripts), the per-dialogue
measure (`measure_dialogue`), its aggregate per (simulator, domain) (`aggregate`), the re-sampling
rates read from the simulator's own counters (`stats_delta`), the ratios to the scripted reference
row (`add_ratios`) and the scalars for MLflow (`env_summary`). What each number means is in
`environment_run`'s docstring.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import EpisodeState
from mimesis_rl.simulator.consistency import goal_contradictions
from mimesis_rl.simulator.format import normalise
from mimesis_rl.simulator.rewards.slots import mentions

REFERENCE = "reference"  # the row name of the scripted cooperative user


# ----------------------------------------------------------------------------------------------
# Detectors on single user turns (pure functions, tested on written transcripts)
# ----------------------------------------------------------------------------------------------

# What "stating the want" means per domain: the card's own value for these slots, or these words.
WANT_SLOTS: dict[str, tuple[str, ...]] = {
    "shopping": ("category",),
    "bargain": ("item",),
    "campsite": ("high", "medium", "low"),
    "travel": ("kind", "food"),
    "support": (),
    "returns": ("item", "order"),
    "content": ("genre",),
    "tutoring": ("topic",),
}
WANT_WORDS: dict[str, str] = {
    "shopping": r"headphones?|earbuds|backpack|bag|jacket|coat|sneakers?|shoes|trainers|watch|lamp",
    "bargain": r"\bbuy|purchase|how much|price",
    "campsite": r"supplies|packages?",
    "travel": r"\bbook|reserv|table for|a room|hotel|restaurant",
    "support": r"internet|wi-?fi|connection|router|online|network|modem",
    "returns": r"\breturn|refund|send (?:it )?back|exchange",
    "content": r"movie|film|something to watch|comedy|drama|thriller|documentary|horror|romance|sci-?fi",
    "tutoring": r"math|arithmetic|fraction|multipl|negative|subtract|divid|homework|problem|equation",
}


def want_stated(message: str, goal: GoalCard, domain: str) -> bool:
    """Does this user message say what the user is after (the item, the task, the problem)?"""
    if not message.strip():
        return False
    for name in WANT_SLOTS.get(domain, ()):
        value = goal.slots.get(name)
        if value is not None and not isinstance(value, bool) and mentions(value, message):
            return True
    words = WANT_WORDS.get(domain)
    return bool(words and re.search(rf"(?:{words})", message, re.IGNORECASE))


def verbatim_runs(messages: Sequence[str], run: int = 3) -> int:
    """How many times a non-empty message is the `run`-th (or later) identical one in a row."""
    count, streak, last = 0, 0, None
    for message in messages:
        text = normalise(message)
        if text and text == last:
            streak += 1
        else:
            streak = 1 if text else 0
        last = text or None
        if streak >= run:
            count += 1
    return count


def turns_until_want(messages: Sequence[str], goal: GoalCard, domain: str) -> int | None:
    """1-based index of the first user turn that states the want (None: never)."""
    for i, message in enumerate(messages, start=1):
        if want_stated(message, goal, domain):
            return i
    return None


# ----------------------------------------------------------------------------------------------
# Per-dialogue and per-(simulator, domain) measurements
# ----------------------------------------------------------------------------------------------


@dataclass
class DialogueMeasure:
    """What one finished dialogue says about its user side."""

    success: bool
    reward: float
    user_turns: int  # turns the agent saw (a message reached it)
    contradicting_turns: int
    contradicted_slots: list[str]
    want_turn: int | None
    repeats: int
    with_reasoning: int
    invalid_end: str | None
    end_reason: str | None


def measure_dialogue(state: EpisodeState, repeat_run: int = 3) -> DialogueMeasure:
    """Read one finished dialogue's trace (the user side's replies and the verdict)."""
    user_turns = [t for t in state.trace if t.role == "user"]
    delivered = [t for t in user_turns if not str(t.meta.get("end_reason", "")).startswith("invalid_turn")]
    messages = [t.content for t in delivered]
    slots: list[str] = []
    contradicting = 0
    for message in messages:
        found = goal_contradictions(message, state.goal, state.domain)
        contradicting += bool(found)
        slots += found
    invalid = next(
        (
            str(t.meta["end_reason"])
            for t in user_turns
            if str(t.meta.get("end_reason", "")).startswith("invalid_turn")
        ),
        None,
    )
    verdict = state.verdict
    return DialogueMeasure(
        success=bool(verdict and verdict.success),
        reward=float(verdict.reward if verdict else 0.0),
        user_turns=len(delivered),
        contradicting_turns=contradicting,
        contradicted_slots=slots,
        want_turn=turns_until_want(messages, state.goal, state.domain),
        repeats=verbatim_runs(messages, repeat_run),
        with_reasoning=sum(1 for t in delivered if (t.reasoning or "").strip()),
        invalid_end=invalid,
        end_reason=state.end_reason,
    )


def _share(num: float, den: float) -> float | None:
    return num / den if den else None


def aggregate(measures: Sequence[DialogueMeasure]) -> dict[str, Any]:
    """Per-(simulator, domain) row from its dialogues."""
    n = len(measures)
    turns = sum(m.user_turns for m in measures)
    stated = [m.want_turn for m in measures if m.want_turn is not None]
    slots: dict[str, int] = {}
    for m in measures:
        for s in m.contradicted_slots:
            slots[s] = slots.get(s, 0) + 1
    ends: dict[str, int] = {}
    for m in measures:
        ends[str(m.end_reason)] = ends.get(str(m.end_reason), 0) + 1
    return {
        "dialogues": n,
        "success_rate": _share(sum(m.success for m in measures), n),
        "mean_reward": float(np.mean([m.reward for m in measures])) if n else None,
        "user_turns": turns,
        "contradiction_rate": _share(sum(m.contradicting_turns for m in measures), turns),
        "contradicted_slots": slots,
        "turns_to_want": float(np.mean(stated)) if stated else None,
        "want_never_share": _share(sum(1 for m in measures if m.want_turn is None), n),
        "verbatim_repeats": sum(m.repeats for m in measures),
        "repeat_dialogue_share": _share(sum(1 for m in measures if m.repeats), n),
        "reasoning_share": _share(sum(m.with_reasoning for m in measures), turns),
        "invalid_end_share": _share(sum(1 for m in measures if m.invalid_end), n),
        "end_reasons": ends,
    }


def stats_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float | None]:
    """Role breaks and invalid turns of one run, from the simulator's cumulative `stats`."""
    samples = after.get("total", 0.0) - before.get("total", 0.0)
    turns = after.get("turns", 0.0) - before.get("turns", 0.0)
    breaks = after.get("role_breaks", 0.0) - before.get("role_breaks", 0.0)
    failed = after.get("failed", 0.0) - before.get("failed", 0.0)
    clean = after.get("clean", 0.0) - before.get("clean", 0.0)
    repeats = after.get("repeats", 0.0) - before.get("repeats", 0.0)
    caught = after.get("contradicting", 0.0) - before.get("contradicting", 0.0)
    forced = after.get("closed_at_budget", 0.0) - before.get("closed_at_budget", 0.0)
    delivered = after.get("delivered", 0.0) - before.get("delivered", 0.0)
    return {
        "samples": samples,
        "role_break_rate": _share(breaks, turns),
        "repeat_resample_rate": _share(repeats, turns),
        "contradiction_resample_rate": _share(caught, turns),
        "failed_turn_rate": _share(failed, turns),
        "clean_rate": _share(clean, samples),
        "closed_at_budget_share": _share(forced, delivered),
    }


@dataclass
class EnvironmentRun:
    """Rows per user side (the reference first) and domain, plus the transcripts."""

    rows: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    overall: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    transcripts: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)  # eval.decisions.dialogue_decisions

    def as_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "rows": self.rows,
            "overall": self.overall,
            "seconds": self.seconds,
            "decisions": self.decisions,
        }


def add_ratios(run: EnvironmentRun) -> None:
    """success / reward ratio of each simulator to the reference, per domain and overall."""
    ref = run.rows.get(REFERENCE)
    if ref is None:
        return
    for name, rows in run.rows.items():
        for domain, row in rows.items():
            base = ref.get(domain, {})
            row["success_ratio"] = _ratio(row.get("success_rate"), base.get("success_rate"))
            row["reward_ratio"] = _ratio(row.get("mean_reward"), base.get("mean_reward"))
        overall, base = run.overall[name], run.overall[REFERENCE]
        overall["success_ratio"] = _ratio(overall.get("success_rate"), base.get("success_rate"))
        overall["reward_ratio"] = _ratio(overall.get("mean_reward"), base.get("mean_reward"))
        ratios = [row["success_ratio"] for row in rows.values() if row.get("success_ratio") is not None]
        overall["min_success_ratio"] = min(ratios) if ratios else None


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


def env_summary(run: EnvironmentRun) -> dict[str, dict[str, float]]:
    """Scalars per user side: overall and per domain (`<domain>.<metric>`), for MLflow and metrics."""
    keys = (
        "success_rate",
        "success_ratio",
        "min_success_ratio",
        "mean_reward",
        "reward_ratio",
        "contradiction_rate",
        "turns_to_want",
        "want_never_share",
        "verbatim_repeats",
        "reasoning_share",
        "role_break_rate",
        "repeat_resample_rate",
        "contradiction_resample_rate",
        "failed_turn_rate",
        "invalid_end_share",
        "card_agreement",
        "card_yes_rate",
        "card_neither_rate",
        "card_false_yes_rate",
        "user_turns",
        "dialogues",
    )
    out: dict[str, dict[str, float]] = {}
    for name, rows in run.rows.items():
        row = {k: float(run.overall[name][k]) for k in keys if run.overall[name].get(k) is not None}
        for domain, values in rows.items():
            row.update({f"{domain}.{k}": float(values[k]) for k in keys if values.get(k) is not None})
        row["seconds"] = run.seconds[name]
        out[name] = row
    return out
