"""Characters that change what a reader sees without being visible: NUL and other control
characters, bidirectional overrides ("Trojan Source"), lone surrogates.

Why: they pass every length and schema check, yet a NUL truncates text in C-based tools, a bidi
override shows a reader text in another order than a model reads it, and a lone surrogate cannot be
written as UTF-8 at all. `validate` flags them (the record is kept, the report lists it); the
server rejects them at the edge (422 naming the field).
"""

from __future__ import annotations

import re

# C0 controls except tab, newline, carriage return; DEL; C1 controls.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Embeddings/overrides (U+202A-U+202E) and isolates (U+2066-U+2069). Plain marks (LRM/RLM) are fine.
BIDI = re.compile(r"[\u202a-\u202e\u2066-\u2069]")
SURROGATE = re.compile(r"[\ud800-\udfff]")


def suspicious_chars(text: str) -> list[str]:
    """Kinds of invisible trouble in `text`, in a fixed order: nul, control, bidi_override, surrogate."""
    found = []
    if "\x00" in text:
        found.append("nul")
    if any(ch != "\x00" for ch in CONTROL.findall(text)):
        found.append("control")
    if BIDI.search(text):
        found.append("bidi_override")
    if SURROGATE.search(text):
        found.append("surrogate")
    return found


def describe(kinds: list[str]) -> str:
    """`NUL, a bidi override` — for error messages."""
    words = {"nul": "a NUL character", "control": "a control character", "bidi_override":
             "a bidirectional override (U+202A-U+202E, U+2066-U+2069)", "surrogate": "a lone surrogate"}
    return ", ".join(words[k] for k in kinds)
