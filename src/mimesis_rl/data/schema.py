"""The conversation contract shared by every stage (see DESIGN.md, "Data contract")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# Stable identifiers of the 13 behaviour patterns. The taxonomy in `mimesis_rl.behavior`
# adds definitions and examples; the names live here so the schema can check them.
PATTERN_NAMES: tuple[str, ...] = (
    "vague_request",
    "implicit_preference",
    "withholding_info",
    "privacy_concern",
    "refusal",
    "criticism",
    "pushback",
    "intent_change",
    "goal_ambiguity",
    "emotional_expression",
    "incomplete_utterance",
    "negotiation",
    "follow_up_probe",
)
ROLES: tuple[str, ...] = ("user", "assistant")


class GoalCard(BaseModel):
    """What the user wants: words for the simulator, slots for a verifier, private slot names."""

    model_config = ConfigDict(extra="forbid")

    text: str
    slots: dict[str, Any] = Field(default_factory=dict)
    private: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _private_slots_exist(self) -> GoalCard:
        missing = [name for name in self.private if name not in self.slots]
        if missing:
            raise ValueError(f"private names {missing} are not slots of the goal card")
        return self


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str
    reasoning: str | None = None
    patterns: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content is empty")
        return value

    @field_validator("patterns")
    @classmethod
    def _known_patterns(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(PATTERN_NAMES))
        if unknown:
            raise ValueError(f"unknown pattern names {unknown}; known: {', '.join(PATTERN_NAMES)}")
        return value

    @model_validator(mode="after")
    def _patterns_on_user_turns_only(self) -> Turn:
        if self.role != "user" and self.patterns:
            raise ValueError("patterns are allowed on user turns only")
        return self


class Conversation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation_id: str = Field(min_length=1)
    source: str = Field(min_length=1)
    domain: str = Field(min_length=1)
    persona: dict[str, Any] | None = None
    goal: GoalCard | None = None
    outcome: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None  # source fields no other field holds (kept, never dropped)
    turns: list[Turn] = Field(min_length=2)

    @property
    def user_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.role == "user"]
