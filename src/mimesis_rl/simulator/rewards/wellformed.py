"""Format: a well-formed `<think>` block with real reasoning, and a message as long as real users write."""

from __future__ import annotations

from typing import Any

from mimesis_rl.simulator.format import ParsedTurn
from mimesis_rl.simulator.rewards.common import RewardFunc, named, parse_completions


def format_score(turn: ParsedTurn, length_range: tuple[float, float]) -> float:
    """0 when rejected; otherwise 0.4 + 0.2 each for: no repair, real reasoning, length in range."""
    if not turn.ok:
        return 0.0
    score = 0.4
    if not turn.repairs:
        score += 0.2
    if turn.reasoning and turn.reasoning.strip().lower() != turn.message.strip().lower():
        score += 0.2
    lo, hi = length_range
    if lo <= len(turn.message.split()) <= hi:
        score += 0.2
    return round(score, 6)


def make_format_reward(length_range: tuple[float, float] = (1, 60)) -> RewardFunc:
    """`length_range`: message length in words, e.g. the 5th-95th percentile of real user turns."""

    @named("format")
    def format_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        return [format_score(t, length_range) for t in parse_completions(completions)]

    return format_reward
