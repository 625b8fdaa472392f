"""Decision: on a pending proposal, the reply decides what the card implies, as the environment reads it.

The measured failure this targets: a simulator that states its budget ("My budget is $828.") and
then, offered exactly that, never accepts. Goal pursuit pays for mentioning a card value; this
pays for the outcome. The row's `decision` column is the card user's decision in the same state
(`simulator.decisions`: accept within the limit, turn down beyond it); the reply's decision is
`envs.actions.reply_accepts`, the very reading `TaskEnv.user_turn` applies (a reply that neither
accepts nor declines declines, as it does in the environment). 1 when they agree, else 0: no
sliding score, so words about the offer earn nothing that the decision does not. `by_reasoning`: a
reply whose message says neither decides by its reasoning's verdict, as a simulator played with
`UserSimulator.decide_by_reasoning` does (`verdicts.reasoned_decision`).
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.envs.actions import reply_accepts
from mimesis_rl.envs.protocols import UserReply
from mimesis_rl.simulator.format import ParsedTurn
from mimesis_rl.simulator.rewards.common import RewardFunc, column, named, parse_completions
from mimesis_rl.simulator.verdicts import reasoned_decision


def decision_score(turn: ParsedTurn, expected: str, by_reasoning: bool = False) -> float | None:
    """1.0 when the environment reads the turn's decision as `expected` (`accept` / `reject`), 0.0
    when not or when the turn was rejected; None when no decision was asked for."""
    if expected not in ("accept", "reject"):
        return None
    if not turn.ok:
        return 0.0
    meta = reasoned_decision(turn.reasoning, turn.message) if by_reasoning else {}
    accepted = reply_accepts(UserReply(message=turn.message, reasoning=turn.reasoning, ended=turn.ended,
                                       meta=meta))
    return 1.0 if accepted == (expected == "accept") else 0.0


def make_decision_reward(by_reasoning: bool = False) -> RewardFunc:
    """Rows without a pending proposal (no `decision` column value) get None."""

    @named("decision")
    def decision(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        parsed = parse_completions(completions)
        expected = column(kwargs, "decision", len(parsed), "")
        return [decision_score(t, e or "", by_reasoning) for t, e in zip(parsed, expected, strict=True)]

    return decision
