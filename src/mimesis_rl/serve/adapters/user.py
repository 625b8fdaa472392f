"""`ServedUser`: the served simulator as a user side (`envs.protocols.UserSide`) of the rollout engine.

Why: a trainer that reaches its user over HTTP should still play its dialogues through the project's
one rollout engine (`rollout.run_rollouts`), not a loop of its own. This class is the only thing that
differs from an in-process user: each session keeps the dialogue from the agent's side and asks
`mimesis serve` for the user's next turn. The simulator's runtime (card, reasoning, re-sampling,
leaving) runs on the server, built there like every other user; its reasoning never reaches here.

One batched call (`opening`, `respond`) sends one request per session, `concurrency` at a time, so the
server's batcher sees the whole batch at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from mimesis_rl.envs.protocols import SessionSpec, UserReply
from mimesis_rl.serve.adapters.client import Goal, SimulatorClient, UserTurn

T = TypeVar("T")


@dataclass
class ServedSession:
    """One dialogue: the user's goal card (None = a chit-chat user) and the dialogue, agent's view."""

    goal: Goal | None
    messages: list[dict[str, str]] = field(default_factory=list)


def goal_of(spec: SessionSpec) -> Goal | None:
    """The served user's goal from a session spec: its text, domain and persona; an empty goal text is
    a chit-chat user (the server's default), an empty domain none."""
    if not spec.goal.text:
        return None
    return Goal(spec.goal.text, spec.domain or None, dict(spec.persona))


class ServedUser:
    """UserSide over a `SimulatorClient`; the server samples with its own seeds (none are sent)."""

    def __init__(self, client: SimulatorClient, concurrency: int = 16,
                 name: str = "served-simulator") -> None:
        self.client = client
        self.concurrency = max(1, concurrency)
        self.name = name

    def start(self, specs: list[SessionSpec]) -> list[ServedSession]:
        return [ServedSession(goal_of(spec)) for spec in specs]

    def opening(self, sessions: list[ServedSession]) -> list[UserReply]:
        return self._turns(sessions)

    def respond(self, sessions: list[ServedSession], agent_messages: list[str]) -> list[UserReply]:
        for session, message in zip(sessions, agent_messages, strict=True):
            session.messages.append({"role": "assistant", "content": message})
        return self._turns(sessions)

    def _turns(self, sessions: list[ServedSession]) -> list[UserReply]:
        turns = _concurrently(lambda s: self.client.next_turn(s.messages, s.goal), sessions, self.concurrency)
        replies = []
        for session, turn in zip(sessions, turns, strict=True):
            if not turn.ended:  # a user who left says nothing more the agent answers
                session.messages.append({"role": "user", "content": turn.message})
            replies.append(_reply(turn))
        return replies


def _reply(turn: UserTurn) -> UserReply:
    return UserReply(message=turn.message, ended=turn.ended)


def _concurrently(call: Callable[[ServedSession], T], items: Sequence[ServedSession],
                  workers: int) -> list[T]:
    if not items:
        return []
    with ThreadPoolExecutor(min(workers, len(items))) as pool:
        return list(pool.map(call, items))
