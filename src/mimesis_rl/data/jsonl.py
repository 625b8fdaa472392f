"""JSONL reading and writing that names the file, line and field of every bad record."""

from __future__ import annotations

import base64
import json
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
JSON_WHITESPACE = b" \t\r\n"


def is_blank(raw: bytes) -> bool:
    """A line of JSON whitespace only. Other invisible characters (NBSP, form feed, U+2028) are not
    blank: such a line is reported as malformed rather than skipped without a word."""
    return not raw.strip(JSON_WHITESPACE)


def iter_raw_lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """(line number, the line's bytes without its final newline); a UTF-8 BOM opening the file is
    dropped. Lines split on `\\n` only, so a stray `\\r` stays inside its line."""
    path = Path(path)
    try:
        check_input_file(path)
    except PathError as exc:
        raise DataError(str(exc)) from None
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            yield lineno, raw[:-1] if raw.endswith(b"\n") else raw


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not standard JSON")


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
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        shown = raw.decode("utf-8", errors="backslashreplace")
        reason = f"not UTF-8 at byte {exc.start} (0x{raw[exc.start]:02x}): {exc.reason}"
        return BadRecord(str(path), lineno, "", reason, shown, base64.b64encode(raw).decode("ascii"))
    try:
        obj = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        return BadRecord(str(path), lineno, "", f"malformed JSON: {exc.msg} (column {exc.colno})", text)
    except ValueError as exc:
        return BadRecord(str(path), lineno, "", f"malformed JSON: {exc}", text)
    except RecursionError:
        return BadRecord(str(path), lineno, "", "malformed JSON: nested too deeply", text)
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


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any | BadRecord]]:
    """Yield (line number, parsed JSON object or BadRecord); blank lines are skipped.

    Decoding is strict and per line: a line that is not UTF-8 is a BadRecord ("not UTF-8 at byte
    N"), never a record with U+FFFD in it.
    """
    for lineno, raw in iter_raw_lines(path):
        if is_blank(raw):
            continue
        yield lineno, parse_line(path, lineno, raw)


def iter_conversations(path: str | Path) -> Iterator[tuple[int, Conversation | BadRecord]]:
    """Parse every line against the schema; bad lines come back as BadRecord, never silently dropped."""
    for lineno, obj in iter_jsonl(path):
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
