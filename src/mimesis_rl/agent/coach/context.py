"""What a coach may read about one agent turn: hindsight the agent did not have.

`CoachContext` holds the user's following turns (reasoning included), the goal card with its private
slots and how the dialogue ended; the `contexts_from_*` readers build one per agent turn from a trace,
a finished episode state or a transcript record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import EpisodeState, TraceTurn


@dataclass
class CoachContext:
    """What the coach may read about one agent turn (hindsight the agent did not have)."""

    episode_id: str
    domain: str
    goal: GoalCard
    turn: int  # 0-based index of the agent turn in the dialogue
    agent_message: str
    action: dict[str, Any] | None
    later: list[TraceTurn]  # the user's following turns (up to the horizon), reasoning included
    ended_after: str | None  # "user_left" / "accepted" / ... when the dialogue ended within the horizon
    slot_labels: dict[str, str] = field(default_factory=dict)

    def label(self, slot: str) -> str:
        return self.slot_labels.get(slot, slot.replace("_", " "))


def _slot_labels(domain: str) -> dict[str, str]:
    try:
        from mimesis_rl.envs.registry import DOMAINS
    except ImportError:  # pragma: no cover - envs is below agent, always importable
        return {}
    d = DOMAINS.get(domain)
    return dict(d.user_policy.slot_labels) if d else {}


def contexts_from_trace(
    episode_id: str,
    domain: str,
    goal: GoalCard,
    trace: Sequence[TraceTurn],
    end_reason: str | None,
    horizon: int = 2,
) -> list[CoachContext]:
    """One context per assistant turn of the trace, in order; `horizon` later user turns each."""
    if horizon < 1:
        raise ValueError(f"coach horizon must be >= 1, got {horizon}")
    labels = _slot_labels(domain)
    out: list[CoachContext] = []
    agent_index = [i for i, t in enumerate(trace) if t.role == "assistant"]
    for k, i in enumerate(agent_index):
        later = [t for t in trace[i + 1 :] if t.role == "user"][:horizon]
        last_in_horizon = i + 1
        seen = 0
        for j in range(i + 1, len(trace)):
            if trace[j].role == "user":
                seen += 1
                if seen == horizon:
                    last_in_horizon = j
                    break
            last_in_horizon = j
        ended = end_reason if last_in_horizon >= len(trace) - 1 else None
        out.append(
            CoachContext(
                episode_id=episode_id,
                domain=domain,
                goal=goal,
                turn=k,
                agent_message=trace[i].content,
                action=trace[i].meta.get("action"),
                later=later,
                ended_after=ended,
                slot_labels=labels,
            )
        )
    return out


def contexts_from_state(state: EpisodeState, horizon: int = 2) -> list[CoachContext]:
    """Coach contexts of a finished episode (`RolloutResult.states`)."""
    return contexts_from_trace(
        state.episode_id, state.domain, state.goal, state.trace, state.end_reason, horizon
    )


def contexts_from_record(record: Mapping[str, Any], horizon: int = 2) -> list[CoachContext]:
    """Coach contexts of a transcript record (`RolloutResult.records()`), for offline coaching."""
    where = f"episode {record.get('episode_id', '?')!r}"
    try:
        trace = [TraceTurn(**t) for t in record["turns"]]
        goal = GoalCard.model_validate(record["goal"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: not a transcript record ({exc})") from exc
    return contexts_from_trace(
        str(record["episode_id"]), str(record["domain"]), goal, trace, record.get("end_reason"), horizon
    )
