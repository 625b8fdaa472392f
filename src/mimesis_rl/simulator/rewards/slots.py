"""Does a message mention a goal slot's value? Shared by goal consistency and paced disclosure."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

_NUMBER = re.compile(r"(?<![\w.])\$?(\d+(?:[.,]\d+)?)(?![\w])")


def slot_values(value: Any) -> list[str]:
    """The surface forms a slot value can take in text (lists and dicts give several)."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, Mapping):
        return [v for item in value.values() for v in slot_values(item)]
    if isinstance(value, list | tuple | set):
        return [v for item in value for v in slot_values(item)]
    text = str(value).strip()
    return [text] if text else []


def numbers_in(text: str) -> list[float]:
    return [float(m.group(1).replace(",", "")) for m in _NUMBER.finditer(text)]


def mentions(value: Any, text: str) -> bool:
    """True when any surface form of `value` occurs in `text` (numbers exactly, words on boundaries)."""
    for form in slot_values(value):
        try:
            number = float(form)
        except ValueError:
            number = None
        if number is not None:
            if any(abs(found - number) < 1e-9 for found in numbers_in(text)):
                return True
            continue
        if re.search(rf"(?<!\w){re.escape(form)}(?!\w)", text, re.IGNORECASE):
            return True
    return False


def revealed_slots(slots: Mapping[str, Any], text: str, names: Iterable[str] | None = None) -> list[str]:
    """Names of the slots (all, or only `names`) whose value the text mentions."""
    keys = list(names) if names is not None else list(slots)
    return [k for k in keys if k in slots and mentions(slots[k], text)]


def load_slots(value: Any) -> dict[str, Any]:
    """Slots from a dataset column: a dict, a JSON object string, or nothing."""
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    loaded = json.loads(value)
    if not isinstance(loaded, dict):
        raise ValueError(f"goal slots must be a JSON object, got {type(loaded).__name__}")
    return loaded
