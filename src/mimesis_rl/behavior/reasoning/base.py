"""The interface every reasoning backend shares, and the batched driver with the fallback rule.

`rationalize(conversations)` returns the same conversations with a first-person trace on every
user turn. A backend writes traces for a batch of `TurnContext`s; the driver cleans each trace,
rejects one that is empty or repeats the message, and lets the fallback writer (the template
backend) fill that turn instead, counting why.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from mimesis_rl.behavior.reasoning.checks import DEFAULT_MAX_OVERLAP, repetition_problem, voice_problem
from mimesis_rl.behavior.reasoning.context import TurnContext, iter_contexts, with_reasoning
from mimesis_rl.data.schema import Conversation

log = logging.getLogger(__name__)

_THINK_TAG = re.compile(r"</?think>", re.IGNORECASE)
# Control characters and U+FFFD (undecodable bytes) never belong in a trace.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
# Small models announce the answer ("The user's private reasoning is: ...") and echo prompt lines.
_PREAMBLE = re.compile(r"^(?:the )?user'?s? (?:private )?(?:reasoning|thoughts?)\b[^:\n]{0,40}:\s*",
                       re.IGNORECASE)
_PROMPT_ECHO = re.compile(r"(?:the user's (?:message|goal)|the other side just said|domain|persona):",
                          re.IGNORECASE)


@dataclass
class RationalizeStats:
    """What a rationalizer did: traces written by the backend, traces kept, fallbacks by reason."""

    turns: int = 0
    written: int = 0
    kept: int = 0
    fallbacks: Counter[str] = field(default_factory=Counter)

    @property
    def fallback_total(self) -> int:
        return sum(self.fallbacks.values())

    def as_metrics(self) -> dict[str, Any]:
        return {"user_turns": self.turns, "written_by_backend": self.written, "kept_existing": self.kept,
                "fallbacks": self.fallback_total, "fallback_reasons": dict(sorted(self.fallbacks.items()))}


@runtime_checkable
class Rationalizer(Protocol):
    """Gives every user turn a private reasoning trace; the rest of each conversation is unchanged."""

    name: str
    stats: RationalizeStats

    def rationalize(self, conversations: Sequence[Conversation]) -> list[Conversation]: ...


def clean_trace(text: str | None) -> str:
    """Strip think tags, unprintable characters, quotes and extra spaces; keep the first paragraph."""
    if not text:
        return ""
    text = _UNPRINTABLE.sub("", _THINK_TAG.sub("", text)).strip()
    text = text.split("\n\n")[0].strip()
    text = _PREAMBLE.sub("", text)
    echo = _PROMPT_ECHO.search(text)
    if echo:
        text = text[:echo.start()].strip()
    text = " ".join(text.split())
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def fallback_category(problem: str) -> str:
    """A short metric key for a check failure ('token overlap 0.91 > 0.70' -> 'repeats_message')."""
    if problem in ("empty", "no words"):
        return "empty"
    if problem.startswith("too short"):
        return "too_short"
    if problem in ("not first person", "talks about the user", "speaks as the assistant"):
        return "off_voice"
    return "repeats_message"


class BatchRationalizer(ABC):
    """Shared driver: batch the user turns, ask the backend, check each trace, fall back when bad.

    keep_existing: a turn that already carries a valid trace (some corpora ship one) keeps it.
    min_words: a backend trace shorter than this is rejected too (a model that stops after one word).
    first_person: reject a backend trace that is not in the user's own voice (`checks.voice_problem`).
    """

    name = "batch"

    def __init__(self, *, batch_size: int = 16, max_overlap: float = DEFAULT_MAX_OVERLAP,
                 keep_existing: bool = True, fallback: BatchRationalizer | None = None,
                 min_words: int = 1, first_person: bool = False) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self.max_overlap = max_overlap
        self.keep_existing = keep_existing
        self.fallback = fallback
        self.min_words = min_words
        self.first_person = first_person
        self.stats = RationalizeStats()

    @abstractmethod
    def write(self, contexts: Sequence[TurnContext]) -> list[str | None]:
        """One raw trace per context (None when the backend has nothing), in order."""

    def rationalize(self, conversations: Sequence[Conversation]) -> list[Conversation]:
        traces: dict[tuple[str, int], str] = {}
        todo: list[TurnContext] = []
        for conversation in conversations:
            for ctx in iter_contexts(conversation):
                self.stats.turns += 1
                existing = conversation.turns[ctx.turn_index].reasoning
                if self.keep_existing and repetition_problem(existing, ctx.message, self.max_overlap) is None:
                    traces[ctx.key] = existing  # type: ignore[assignment]
                    self.stats.kept += 1
                else:
                    todo.append(ctx)
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start:start + self.batch_size]
            traces.update(self._checked(batch, self.write(batch)))
        by_conversation: dict[str, dict[int, str]] = {}
        for (cid, index), text in traces.items():
            by_conversation.setdefault(cid, {})[index] = text
        return [with_reasoning(c, by_conversation.get(c.conversation_id, {})) for c in conversations]

    def _checked(self, batch: Sequence[TurnContext], raw: Sequence[str | None]) -> dict[tuple[str, int], str]:
        if len(raw) != len(batch):
            raise RuntimeError(f"{self.name}: backend returned {len(raw)} traces for {len(batch)} turns")
        good: dict[tuple[str, int], str] = {}
        failed: list[TurnContext] = []
        for ctx, text in zip(batch, raw, strict=True):
            trace = clean_trace(text)
            problem = repetition_problem(trace, ctx.message, self.max_overlap)
            if problem is None and len(trace.split()) < self.min_words:
                problem = f"too short ({len(trace.split())} words < {self.min_words})"
            if problem is None and self.first_person:
                problem = voice_problem(trace)
            if problem is None:
                good[ctx.key] = trace
                self.stats.written += 1
                continue
            if self.fallback is None:
                raise ValueError(f"{self.name}: conversation {ctx.conversation_id!r} turn {ctx.turn_index}: "
                                 f"trace rejected ({problem}) and no fallback is configured")
            self.stats.fallbacks[fallback_category(problem)] += 1
            log.debug("%s: conversation %r turn %d: %s; falling back to %s", self.name, ctx.conversation_id,
                      ctx.turn_index, problem, self.fallback.name)
            failed.append(ctx)
        if failed:
            assert self.fallback is not None
            log.info("%s: %d of %d traces fell back to %s (total so far: %s)", self.name, len(failed),
                     len(batch), self.fallback.name, dict(self.stats.fallbacks))
            for ctx, text in zip(failed, self.fallback.write(failed), strict=True):
                trace = clean_trace(text)
                problem = repetition_problem(trace, ctx.message, self.max_overlap)
                if problem is not None:
                    raise ValueError(f"{self.fallback.name}: conversation {ctx.conversation_id!r} turn "
                                     f"{ctx.turn_index}: fallback trace rejected too ({problem})")
                good[ctx.key] = trace
        return good
