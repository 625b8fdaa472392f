"""Goal pursuit: a user with a goal card talks about its goal.

The failure it targets: a simulator trained on chit-chat opens a task with small talk about the
conversation itself and never says what it wants, so an agent has nothing to work with. A message
that states some value of the card (what it wants, a constraint, a private fact when the time has
come) pursues the goal; one that mentions nothing of it does not. What may be said when is paced
disclosure's business; whether it is said truthfully, goal consistency's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mimesis_rl.simulator.rewards.common import RewardFunc, column, named, parse_completions
from mimesis_rl.simulator.rewards.slots import load_slots, revealed_slots

NOT_A_FACT = ("changeable",)  # the card's bookkeeping (alternatives for a change of mind), not a want


def pursuit_score(message: str, slots: Mapping[str, Any]) -> float | None:
    """1.0 when the message states a value of the goal card, 0.0 when it states none; None without slots."""
    facts = {k: v for k, v in slots.items() if k not in NOT_A_FACT}
    if not facts:
        return None
    return 1.0 if revealed_slots(facts, message) else 0.0


def make_goal_pursuit_reward() -> RewardFunc:
    """Rows without a goal card get None; rejected outputs 0."""

    @named("goal_pursuit")
    def goal_pursuit(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        parsed = parse_completions(completions)
        out: list[float | None] = []
        for turn, raw_slots in zip(parsed, column(kwargs, "goal_slots", len(parsed)), strict=True):
            score = pursuit_score(turn.message if turn.ok else "", load_slots(raw_slots))
            out.append(score)
        return out

    return goal_pursuit
