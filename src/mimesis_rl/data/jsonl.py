"""JSONL reading and writing that names the file, line and field of every bad record."""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mimesis_rl.data.schema import Conversation
from mimesis_rl.fsutil import PathError, atomic_open, check_input_file


@dataclass(frozen=True)
class BadRecord:
    """A line that could not become a record, with where and why."""

    path: str
    line: int
    field: str
    reason: str
    raw: str
    raw_base64: str | None = None  # the exact bytes, when `raw` had to escape some (not UTF-8)

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.reason}" if self.field else f"{where}: {self.reason}"

    def to_quarantine(self) -> dict[str, Any]:
        out = {"source_file": self.path, "line": self.line, "field": self.field, "reason": self.reason,
               "raw": self.raw}
        if self.raw_base64 is not None:
            out["raw_base64"] = self.raw_base64
        return out


class DataError(ValueError):
    """Raised for input that cannot be read at all, or a bad record in strict mode."""


def check_share(value: float, name: str) -> float:
    """A bad-record threshold must be a share: a number in [0, 1] (0.05 means 5%)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise DataError(f"{name} must be a share between 0 and 1 (0.05 = 5%), got {value!r}")
    return float(value)


def _field_path(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def explain_validation_error(err: ValidationError) -> tuple[str, str]:
    """(field path, reason) of the first error, e.g. ('turns[2].role', "Input should be 'user' ...")."""
    first = err.errors()[0]
    return _field_path(tuple(first.get("loc", ()))), first.get("msg", str(err))


BOM = b"\xef\xbb\xbf"
MAX_LINE_BYTES = 16 * 1024 * 1024  # a longer line is quarantined unread (validate.max_line_bytes)
MAX_DEPTH = 64  # deeper JSON nesting is quarantined: pydantic, GX and json.dumps recurse on it
MAX_INT_DIGITS = 19  # beyond the 64-bit range: pandas, GX and MLflow cannot hold it
SHOWN_BYTES = 4096  # what the quarantine keeps of an over-long line
JSON_WHITESPACE = b" \t\r\n"


def is_blank(raw: bytes) -> bool:
    """A line of JSON whitespace only. Other invisible characters (NBSP, form feed, U+2028) are not
    blank: such a line is reported as malformed rather than skipped without a word."""
    return not raw.strip(JSON_WHITESPACE)


class LongLine(bytes):
    """An over-long line: its first SHOWN_BYTES bytes, and `size`, the whole line's length. It is read
    in chunks and never held whole, so one runaway line cannot exhaust memory."""

    size: int
    cap: int


def iter_raw_lines(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(line number, the line's bytes without its final newline); a UTF-8 BOM opening the file is
    dropped. Lines split on `\\n` only, so a stray `\\r` stays inside its line. A line longer than
    `max_line_bytes` comes back as a LongLine (its head and its size) for the caller to quarantine."""
    path = Path(path)
    try:
        check_input_file(path)
    except PathError as exc:
        raise DataError(str(exc)) from None
    with path.open("rb") as handle:
        lineno = 0
        while True:
            raw = handle.readline(max_line_bytes + 1)
            if not raw:
                return
            lineno += 1
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                head, size = raw[:SHOWN_BYTES], len(raw)
                while not raw.endswith(b"\n"):  # skip the rest of the line, a chunk at a time
                    raw = handle.readline(1 << 20)
                    if not raw:
                        break
                    size += len(raw) - raw.endswith(b"\n")
                long = LongLine(head)
                long.size, long.cap = size, max_line_bytes
                yield lineno, long
                continue
            yield lineno, raw[:-1] if raw.endswith(b"\n") else raw


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not standard JSON")


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {digits} digits is out of the 64-bit range")
    value = int(text)
    if not -(2**63) <= value < 2**64:
        raise ValueError(f"the integer {text} is out of the 64-bit range")
    return value


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} overflows a float (would become {value})")
    return value


def _depth(obj: Any) -> int:
    """Nesting depth, without recursion (the point is to refuse what recursion cannot handle)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def loads_strict(text: str | bytes) -> Any:
    """json.loads for data we keep: standard JSON only (no NaN/Infinity), finite numbers, integers in
    the 64-bit range, no repeated key, at most MAX_DEPTH levels. Raises ValueError saying which."""
    try:
        obj = json.loads(text, parse_constant=_refuse_constant, parse_int=_int, parse_float=_float,
                         object_pairs_hook=_no_duplicate_keys)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    if isinstance(obj, dict | list) and _depth(obj) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return obj


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"key {dup!r} appears twice in one object")
    return obj


def parse_line(path: str | Path, lineno: int, raw: bytes) -> dict[str, Any] | BadRecord:
    """One JSONL line, strictly: UTF-8, standard JSON, an object, no repeated key, no lone surrogate.

    Anything else is a BadRecord whose reason says what and where; nothing is repaired, so a
    record that passes is byte for byte the line that was read.
    """
    if isinstance(raw, LongLine):
        shown = raw.decode("utf-8", errors="backslashreplace")
        return BadRecord(str(path), lineno, "", f"line too long: {raw.size} bytes, over the cap of {raw.cap} "
                         f"(validate.max_line_bytes); the first {len(raw)} bytes are kept here", shown)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        shown = raw.decode("utf-8", errors="backslashreplace")
        reason = f"not UTF-8 at byte {exc.start} (0x{raw[exc.start]:02x}): {exc.reason}"
        return BadRecord(str(path), lineno, "", reason, shown, base64.b64encode(raw).decode("ascii"))
    try:
        obj = loads_strict(text)
    except json.JSONDecodeError as exc:
        return BadRecord(str(path), lineno, "", f"malformed JSON: {exc.msg} (column {exc.colno})", text)
    except ValueError as exc:
        return BadRecord(str(path), lineno, "", f"malformed JSON: {exc}", text)
    if not isinstance(obj, dict):
        return BadRecord(str(path), lineno, "", f"expected a JSON object, got {type(obj).__name__}", text)
    if b"\\u" in raw and re.search(rb"\\u[dD][89a-fA-F]", raw):  # a surrogate escape: paired?
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start]
            return BadRecord(str(path), lineno, "", f"lone surrogate \\u{ord(bad):04x} in a string: "
                             "not a character, cannot be written as UTF-8", text)
    return obj


def iter_jsonl(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES,
               ) -> Iterator[tuple[int, Any | BadRecord]]:
    """Yield (line number, parsed JSON object or BadRecord); blank lines are skipped.

    Decoding is strict and per line: a line that is not UTF-8 is a BadRecord ("not UTF-8 at byte
    N"), never a record with U+FFFD in it.
    """
    for lineno, raw in iter_raw_lines(path, max_line_bytes):
        if is_blank(raw):
            continue
        yield lineno, parse_line(path, lineno, raw)


def iter_conversations(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES,
                       ) -> Iterator[tuple[int, Conversation | BadRecord]]:
    """Parse every line against the schema; bad lines come back as BadRecord, never silently dropped."""
    for lineno, obj in iter_jsonl(path, max_line_bytes):
        if isinstance(obj, BadRecord):
            yield lineno, obj
            continue
        try:
            yield lineno, Conversation.model_validate(obj)
        except ValidationError as exc:
            field, reason = explain_validation_error(exc)
            yield lineno, BadRecord(str(path), lineno, field, reason, json.dumps(obj, ensure_ascii=False))


def read_conversations(path: str | Path) -> list[Conversation]:
    """Strict read: the first bad record raises DataError naming file, line and field."""
    out: list[Conversation] = []
    for _, item in iter_conversations(path):
        if isinstance(item, BadRecord):
            raise DataError(str(item))
        out.append(item)
    return out


def write_jsonl(path: str | Path, records: Iterable[BaseModel | dict[str, Any]]) -> int:
    """Atomically write records, one JSON object per line; returns the count."""
    count = 0
    with atomic_open(path) as handle:
        for record in records:
            if isinstance(record, BaseModel):
                line = record.model_dump_json(exclude_none=True)
            else:
                line = json.dumps(record, ensure_ascii=False, default=str)
            handle.write(line + "\n")
            count += 1
    return count
