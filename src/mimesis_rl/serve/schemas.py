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
    # the user's decision on the agent's pending proposal where its message says neither yes nor no: a
    # simulator that decides by its reasoning (`sim_sft.decide_by_reasoning`); absent otherwise
    accept: bool | None = None
    reasoning: str | None = None
    replaced_characters: int | None = None  # control characters in the agent's message, replaced by U+FFFD


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


# ----------------------------------------------------------------------------------------------
# OpenAI-compatible chat completions (the caller is the agent; the answer is the user's next turn)

class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "developer", "user", "assistant"] = Field(
        description="from the agent's side: `assistant` = the agent, `user` = the simulated user's past "
                    "turns, `system` (first only) = the user's goal card in plain text")
    content: str | list[TextPart]
    name: str | None = None

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class ChatMetadata(BaseModel):
    model_config = ConfigDict(extra="forbid")

    domain: str | None = Field(default=None, description="task domain (default: general with a goal card, "
                                                         "chitchat without)")
    persona: dict[str, Any] | str | None = Field(default=None, description="who the user is (a dict, or "
                                                                           "a JSON object as a string)")


# Sampling knobs OpenAI clients commonly send. The simulator's sampling is fixed by the served model
# (see /v1/info), so these are accepted and named back in `mimesis.ignored`, never silently used.
IGNORED_OPENAI_FIELDS = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "stop",
                         "presence_penalty", "frequency_penalty", "logit_bias", "user", "store",
                         "parallel_tool_calls", "service_tier", "continue_final_message",
                         "add_generation_prompt")


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="a served simulator, as GET /v1/models lists it")
    messages: list[ChatMessage]
    metadata: ChatMetadata | None = None
    seed: int | None = None
    stream: bool | None = False
    n: int | None = 1
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    user: str | None = None
    store: bool | None = None
    parallel_tool_calls: bool | None = None
    service_tier: str | None = None
    # vLLM's chat-template switches: honoured by a `raw` server (continue a final assistant message)
    continue_final_message: bool | None = None
    add_generation_prompt: bool | None = None

    def ignored(self) -> list[str]:
        return [name for name in IGNORED_OPENAI_FIELDS if getattr(self, name) is not None]
