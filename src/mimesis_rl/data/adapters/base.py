"""What every corpus adapter shares: the items it yields, input resolution, and safe record building.

An adapter maps one corpus format onto the conversation contract. It yields, for every source
record, either `Conversation`s (two-party corpora give one view per speaker) or a `BadRecord`
that says where and why the record could not be mapped, so nothing is ever dropped silently.

For corpora stored as one JSON document rather than JSONL, `BadRecord.line` is the 1-based
index of the record in the document and `field` starts with the record's key or `[index]`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mimesis_rl.data.jsonl import BadRecord, DataError, explain_validation_error, loads_strict
from mimesis_rl.data.schema import Conversation
from mimesis_rl.fsutil import PathError, check_input_file

EMBEDDED = "embedded"

Item = Conversation | BadRecord


@dataclass(frozen=True)
class Excluded(BadRecord):
    """A well-formed record that is not a two-party dialogue (say, an unanswered monologue).

    It is written to the rejects file and counted like a bad record, but it does not count towards
    the bad-record threshold: a corpus full of unanswered openers is not a broken corpus.
    """


class SourceFieldError(ValueError):
    """A source record's field that cannot be mapped; adapters turn it into a BadRecord."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Adapter:
    """One corpus format: how to read one file, which files a folder holds, what ships embedded."""

    name: str
    read_file: Callable[..., Iterator[Item]]
    suffixes: tuple[str, ...]
    embedded: Callable[[], Path] | None = None
    options: tuple[str, ...] = field(default=())

    def files(self, source: str | Path) -> list[Path]:
        """The files behind `source`: `embedded`, a file, or a folder of files with our suffixes."""
        if str(source) == EMBEDDED:
            if self.embedded is None:
                raise DataError(f"adapter {self.name!r} ships no embedded corpus: pass a file or folder path")
            path = self.embedded()
            if not path.is_file():
                raise DataError(f"{path}: embedded corpus of adapter {self.name!r} not found")
            return [path]
        path = Path(source)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(self.suffixes))
            if not found:
                raise DataError(
                    f"{path}: folder holds no {'/'.join(self.suffixes)} files for adapter {self.name!r}"
                )
            return found
        if not path.exists():
            raise DataError(f"{path}: input file not found (adapter {self.name!r})")
        try:
            check_input_file(path, "input")
        except PathError as exc:
            raise DataError(str(exc)) from None
        return [path]

    def read(self, source: str | Path, /, **options: Any) -> Iterator[Item]:
        """Every item of every file behind `source`, lazily, in a stable order.

        Unknown options and missing inputs raise DataError here, before anything is read.
        """
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            accepted = ", ".join(self.options) or "none"
            raise DataError(f"adapter {self.name!r} got unknown options {unknown}; accepted: {accepted}")
        paths = self.files(source)
        return (item for path in paths for item in self.read_file(path, **options))


def load_json_document(path: Path, expected: type) -> Any:
    """A whole-file JSON document of the expected top-level type, or one DataError naming the file."""
    try:
        with path.open(encoding="utf-8-sig") as handle:  # a BOM opening the file is not data
            data = loads_strict(handle.read())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: malformed JSON: {exc.msg} (column {exc.colno})") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text at byte {exc.start}: {exc.reason}") from exc
    except OSError as exc:
        raise DataError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # NaN, 1e400, a 5000-digit integer, nesting too deep, a repeated key
        raise DataError(f"{path}: malformed JSON: {exc}") from None
    if not isinstance(data, expected):
        raise DataError(
            f"{path}: expected a JSON {expected.__name__} at the top level, got {type(data).__name__}"
        )
    return data


def raw_json(record: Any) -> str:
    return json.dumps(record, ensure_ascii=False, default=str)


def build_conversation(data: Mapping[str, Any], *, path: Path, line: int, where: str, raw: str) -> Item:
    """Validate a mapped record against the schema; a failure names the record and the schema field.

    Adapters check source fields themselves (so errors name the source field); this is the safety
    net, and it also insists on at least one user turn, which the simulator needs.
    """
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate escape (`\\ud800`): no character, unwritable
        shown = raw.encode("utf-8", errors="backslashreplace").decode("utf-8")
        return BadRecord(str(path), line, where, f"lone surrogate \\u{ord(exc.object[exc.start]):04x} in a "
                         "string: not a character, cannot be written as UTF-8", shown)
    turns = data.get("turns") or []
    if not any(turn.get("role") == "user" for turn in turns):
        return BadRecord(str(path), line, where, "no user turn in this view", raw)
    try:
        return Conversation.model_validate(data)
    except ValidationError as exc:
        field_path, reason = explain_validation_error(exc)
        return BadRecord(str(path), line, f"{where} -> {field_path}", reason, raw)
