"""Request and response bodies. Unknown fields are rejected, so a typo is a 422 naming the field,
not a silently ignored knob. Responses carry `reasoning` only when the server exposes it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mimesis_rl.data.schema import GoalCard


class NewSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    domain: str = Field(min_length=1, description="task domain, e.g. shopping")
    goal: GoalCard = Field(description="what the user wants: text, slots, private slot names")
    persona: dict[str, Any] = Field(default_factory=dict, description="who the user is")
    seed: int = Field(default=0, description="kept with the session for user sides that are seeded")


class AgentMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1, description="the agent's message, verbatim (action tags included)")


class Reply(BaseModel):
    message: str
    ended: bool
    reasoning: str | None = None


class SessionOpened(Reply):
    session_id: str


class TranscriptTurn(BaseModel):
    role: Literal["user", "assistant"]
    content: str
    reasoning: str | None = None
    note: str | None = None


class Transcript(BaseModel):
    session_id: str
    domain: str
    goal: GoalCard
    persona: dict[str, Any]
    seed: int
    ended: bool
    turns: list[TranscriptTurn]
