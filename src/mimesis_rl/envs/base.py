"""The contracts between an environment, the user side and the agent side.

Any object with the `UserSide` shape can play the user: a trained simulator
(`mimesis_rl.simulator.UserSimulator`), a prompted LLM, or a scripted user.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from mimesis_rl.data.schema import GoalCard


@dataclass
class UserReply:
    """One user turn: what the agent sees (`message`) and what it never sees (`reasoning`)."""

    message: str
    reasoning: str = ""
    ended: bool = False


@dataclass
class SessionSpec:
    """Everything the user side needs to start playing one dialogue."""

    goal: GoalCard
    domain: str
    persona: dict[str, Any] = field(default_factory=dict)
    seed: int = 0


@runtime_checkable
class UserSide(Protocol):
    """Batched user side: one call answers many open sessions at once."""

    name: str

    def start(self, specs: list[SessionSpec]) -> list[Any]:
        """Open one session per spec; returns opaque session handles."""
        ...

    def opening(self, sessions: list[Any]) -> list[UserReply]:
        """The user's first message in each session (the user speaks first)."""
        ...

    def respond(self, sessions: list[Any], agent_messages: list[str]) -> list[UserReply]:
        """Answer the agent's latest message in each session."""
        ...
