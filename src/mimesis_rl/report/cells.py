"""Numbers and text for table cells, shared by the HTML and the Markdown template."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def fmt(value: Any, spec: str = "{:.3f}") -> str:
    """A number for a table cell; `–` for none / NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return spec.format(int(value)) if spec == "{:d}" else spec.format(float(value))
    return str(value)


def with_ci(value: Any, ci: Sequence[float] | None, spec: str = "{:.3f}") -> str:
    """`value [low, high]` (the interval only when there is one)."""
    text = fmt(value, spec)
    if text != "–" and ci and len(ci) == 2 and not any(c is None or math.isnan(c) for c in ci):
        text += f" [{fmt(ci[0], spec)}, {fmt(ci[1], spec)}]"
    return text


def verdict_class(verdict: str) -> str:
    return {"holds": "holds", "does not hold": "fails", "within noise": "noise"}.get(verdict, "missing")


def cut(text: str | None, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
