"""What every coach backend shares: the `Coach` interface, the backend names and a note's shape.

Kept apart from the backends so the CSD settings can check a backend name without loading a model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from mimesis_rl.agent.coach.context import CoachContext

MAX_NOTE_WORDS = 40

COACHES = ("template", "model", "llm")


@runtime_checkable
class Coach(Protocol):
    """Writes one note per context, in order."""

    name: str

    def notes(self, contexts: Sequence[CoachContext]) -> list[str]: ...


def clean_note(text: str | None, max_words: int = MAX_NOTE_WORDS) -> str:
    """One paragraph, no tags, at most `max_words` words."""
    if not text:
        return ""
    text = re.sub(r"</?\w+[^>]*>", " ", text).strip().split("\n\n")[0]
    text = re.sub(r"^(coach(ing)? note|note|advice|instruction)\s*:\s*", "", text.strip(), flags=re.I)
    words = text.split()
    if len(words) > max_words:
        words = words[:max_words]
    return " ".join(words).strip().strip('"').strip()
