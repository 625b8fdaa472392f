"""JSONL reading and writing that names the file, line and field of every bad record."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mimesis_rl.data.schema import Conversation
from mimesis_rl.fsutil import atomic_open


@dataclass(frozen=True)
class BadRecord:
    """A line that could not become a record, with where and why."""

    path: str
    line: int
    field: str
    reason: str
    raw: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.reason}" if self.field else f"{where}: {self.reason}"

    def to_quarantine(self) -> dict[str, Any]:
        return {"source_file": self.path, "line": self.line, "field": self.field, "reason": self.reason,
                "raw": self.raw}


class DataError(ValueError):
    """Raised for input that cannot be read at all, or a bad record in strict mode."""


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


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any | BadRecord]]:
    """Yield (line number, parsed JSON object or BadRecord); blank lines are skipped."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    with path.open(encoding="utf-8", errors="replace") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                reason = f"malformed JSON: {exc.msg} (column {exc.colno})"
                yield lineno, BadRecord(str(path), lineno, "", reason, line.rstrip("\n"))
                continue
            if not isinstance(obj, dict):
                reason = f"expected a JSON object, got {type(obj).__name__}"
                yield lineno, BadRecord(str(path), lineno, "", reason, line.rstrip("\n"))
                continue
            yield lineno, obj


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
