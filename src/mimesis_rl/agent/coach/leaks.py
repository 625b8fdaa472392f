"""The leak guard: notes must tell the agent what to do, not hand it the hidden facts.

`leaks` finds private slot values written verbatim in a note; `redact` replaces them by the slot's
label. The CSD driver counts both rates and redacts before a note reaches the teacher.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mimesis_rl.data.schema import GoalCard


def _values(value: Any) -> list[str]:
    """The verbatim strings a slot value could appear as in text."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        number = float(value)
        text = str(int(number)) if number.is_integer() else f"{number:g}"
        return [text] if len(text) >= 2 else []  # one digit is everywhere ("1 question")
    if isinstance(value, str):
        text = value.strip()
        return [text] if len(text) >= 3 else []
    if isinstance(value, Mapping):
        return [v for item in value.values() for v in _values(item)]
    if isinstance(value, (list, tuple, set)):
        return [v for item in value for v in _values(item)]
    return []


def _pattern(text: str) -> re.Pattern[str]:
    if re.fullmatch(r"[\d.]+", text):
        return re.compile(rf"(?<![\d.]){re.escape(text)}(?![\d]|\.\d)")
    return re.compile(rf"(?<!\w){re.escape(text)}(?!\w)", re.IGNORECASE)


def leaks(note: str, goal: GoalCard) -> list[str]:
    """Private slot names whose value the note writes verbatim (numbers as numbers, words case-blind)."""
    found = []
    for slot in goal.private:
        if any(_pattern(v).search(note) for v in _values(goal.slots.get(slot))):
            found.append(slot)
    return found


def redact(note: str, goal: GoalCard, labels: Mapping[str, str] | None = None) -> str:
    """The note with every private slot value replaced by "their <label>"."""
    labels = labels or {}
    for slot in goal.private:
        for value in sorted(_values(goal.slots.get(slot)), key=len, reverse=True):
            label = labels.get(slot, slot.replace("_", " "))
            note = _pattern(value).sub(f"their {label}", note)
            note = note.replace("$their", "their")
    return note
