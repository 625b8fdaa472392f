"""A user turn as a labeler sees it: the message plus what came before it and the goal card.

Labelers never read a `Conversation` directly; they read `TurnInContext` objects, so the same code
labels a pipeline conversation, a gold item (whose history may be a single agent turn) and a
dialogue handed over by the simulator's reward (`PatternPredictor`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mimesis_rl.data.schema import Conversation, GoalCard, Turn


class ContextError(ValueError):
    """A turn cannot be labelled in context (no agent turn anywhere, empty message)."""


@dataclass(frozen=True)
class TurnInContext:
    """One user message, the turns before it (oldest first), the goal card and where it came from."""

    text: str
    history: tuple[Turn, ...] = ()
    goal: GoalCard | None = None
    domain: str = ""
    where: str = ""

    @property
    def last_agent(self) -> str | None:
        """The agent's most recent turn before the message; None for an opening message."""
        for turn in reversed(self.history):
            if turn.role == "assistant":
                return turn.content
        return None

    @property
    def earlier_user(self) -> tuple[str, ...]:
        """The user's own earlier messages, oldest first."""
        return tuple(t.content for t in self.history if t.role == "user")


def user_turn_contexts(conversation: Conversation, where: str = "") -> list[tuple[int, TurnInContext]]:
    """(turn index, context) for every user turn of a conversation."""
    out: list[tuple[int, TurnInContext]] = []
    prefix = where or conversation.conversation_id
    for index, turn in enumerate(conversation.turns):
        if turn.role != "user":
            continue
        out.append(
            (
                index,
                TurnInContext(
                    text=turn.content,
                    history=tuple(conversation.turns[:index]),
                    goal=conversation.goal,
                    domain=conversation.domain,
                    where=f"{prefix} turn {index}",
                ),
            )
        )
    return out


def check_has_agent(conversation: Conversation, where: str = "") -> None:
    """Raise ContextError when no agent turn exists: the context patterns could not be judged at all."""
    if not any(t.role == "assistant" for t in conversation.turns):
        raise ContextError(
            f"{where or conversation.conversation_id}: turns: no assistant turn, so "
            "withholding_info, refusal, intent_change, ... cannot be judged (turns without context)"
        )


def dialogue_context(
    turns: Sequence[Turn], goal: GoalCard | None = None, domain: str = "", where: str = ""
) -> TurnInContext:
    """The last turn of a dialogue in the context of the others; the last turn must be the user's."""
    if not turns or turns[-1].role != "user":
        raise ContextError(f"{where or 'dialogue'}: the last turn must be a user turn")
    return TurnInContext(
        text=turns[-1].content, history=tuple(turns[:-1]), goal=goal, domain=domain, where=where
    )
