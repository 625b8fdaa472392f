"""Personal data in chat text: e-mail addresses, phone numbers, SSNs and payment card numbers.

`find_pii` returns the spans; `redact` replaces them with typed placeholders (`[EMAIL]`,
`[PHONE]`, `[SSN]`, `[CARD]`). The validate stage counts the spans per turn into its tables, so the
Great Expectations report carries counts, never the values themselves.

What counts as what (chosen so that years, prices and counts in chat stay untouched):
- phone: North-American `555-123-4567` / `(555) 123-4567`, international `+44 20 7946 0958`
  (a `+`, then 8 to 15 digits in groups), and a bare run of exactly 10 digits;
- SSN: `123-45-6789` (US format, with dashes; never-issued areas 000, 666, 9xx excluded);
- card: 13 to 19 digits starting with 2-6 (the card networks' ranges), optionally in groups split
  by spaces or dashes, passing the Luhn check.
A span claimed by an earlier kind (e-mail, card, SSN, phone, in that order) is not counted twice.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

KINDS: tuple[str, ...] = ("email", "card", "ssn", "phone")
PLACEHOLDERS = {kind: f"[{kind.upper()}]" for kind in KINDS}
DESCRIPTIONS = {"email": "an e-mail address", "card": "a payment card number",
                "ssn": "a social security number", "phone": "a phone number"}

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
CARD = re.compile(r"(?<![\w+])\d(?:[ -]?\d){12,18}(?![\w])")
SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])")
PHONE_INTL = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){1,6}(?!\d)")
PHONE_NANP = re.compile(r"(?<![\w+])(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\d-])")
PHONE_BARE = re.compile(r"(?<![\w+.,$€£-])\d{10}(?![\w]|[.,-]\d)")
DIGITS = "0123456789"
_DIGIT_OR_AT = re.compile(r"[0-9@]")


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum every payment card number satisfies."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _spans(text: str) -> Iterable[tuple[str, int, int]]:
    for m in EMAIL.finditer(text):
        yield "email", m.start(), m.end()
    for m in CARD.finditer(text):
        digits = _digits(m.group())
        if 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_ok(digits):
            yield "card", m.start(), m.end()
    for m in SSN.finditer(text):
        yield "ssn", m.start(), m.end()
    for m in PHONE_INTL.finditer(text):
        if 8 <= len(_digits(m.group())) <= 15:
            yield "phone", m.start(), m.end()
    for pattern in (PHONE_NANP, PHONE_BARE):
        for m in pattern.finditer(text):
            yield "phone", m.start(), m.end()


def find_pii(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of every piece of personal data in `text`, in text order, not overlapping."""
    # Cheap tests first: every kind needs an `@` or at least 8 digits (most chat turns have neither).
    if not _DIGIT_OR_AT.search(text) or ("@" not in text and sum(text.count(d) for d in DIGITS) < 8):
        return []
    taken: list[tuple[str, int, int]] = []
    for kind, start, end in _spans(text):
        if all(end <= s or start >= e for _, s, e in taken):
            taken.append((kind, start, end))
    return sorted(taken, key=lambda span: span[1])


def count_pii(text: str) -> Counter[str]:
    return Counter(kind for kind, _, _ in find_pii(text))


def redact(text: str, spans: Sequence[tuple[str, int, int]] | None = None) -> tuple[str, Counter[str]]:
    """`text` with each span replaced by its placeholder, and the spans replaced per kind."""
    spans = find_pii(text) if spans is None else spans
    out, last = [], 0
    for kind, start, end in spans:
        out += [text[last:start], PLACEHOLDERS[kind]]
        last = end
    out.append(text[last:])
    return "".join(out), Counter(kind for kind, _, _ in spans)
