"""Read and check `gold.jsonl`; every problem names the file, line and field.

Two kinds of records (GUIDE.md): `corpus` items point at a turn of an installed corpus by
conversation id and turn index; `written` items carry their text, the turns before it and an
optional goal card. Both become a `GoldItem` holding a `TurnInContext`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.gold.resolve import CorpusResolver, SourceUnavailable
from mimesis_rl.behavior.taxonomy import unknown_patterns
from mimesis_rl.data.jsonl import BadRecord, DataError, explain_validation_error, iter_jsonl
from mimesis_rl.data.schema import PATTERN_NAMES, GoalCard, Turn
from mimesis_rl.data.splitting import group_id

log = logging.getLogger(__name__)
GOLD_DIR = Path(__file__).resolve().parent
GOLD_FILE = GOLD_DIR / "gold.jsonl"
PASS1_FILE = GOLD_DIR / "agreement_pass1.jsonl"
PASS2_FILE = GOLD_DIR / "agreement_pass2.jsonl"
SECOND_ANNOTATOR_FILE = GOLD_DIR / "second_annotator.jsonl"  # an independent, blind pass on real items
SPLITS = ("train", "test")
KINDS = ("corpus", "written")


class GoldError(DataError):
    """A gold record is malformed or points at something that does not exist."""


@dataclass(frozen=True)
class GoldItem:
    id: str
    split: str
    kind: str
    source: str  # the corpus name, or "written"
    selection: str  # random | mined (corpus items) | written
    patterns: tuple[str, ...]
    context: TurnInContext
    dialogue: str = ""  # the source dialogue (both views of a two-party chat share it); bootstrap unit


def _fail(path: Path, line: int, field: str, reason: str) -> GoldError:
    return GoldError(f"{path}:{line}: {field}: {reason}")


def _check_patterns(path: Path, line: int, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, line, "patterns", "expected a list of pattern names")
    unknown = unknown_patterns(value)
    if unknown:
        raise _fail(
            path, line, "patterns", f"unknown pattern names {unknown}; known: {', '.join(PATTERN_NAMES)}"
        )
    return tuple(sorted(set(value), key=PATTERN_NAMES.index))


def _check_written(path: Path, line: int, rec: dict[str, Any]) -> dict[str, Any]:
    text = rec.get("text")
    if not isinstance(text, str) or not text.strip():
        raise _fail(path, line, "text", "a written item needs the user turn's text")
    context = rec.get("context")
    if not isinstance(context, list) or not context:
        raise _fail(
            path,
            line,
            "context",
            "turn without context: a written item needs at least the agent turn before it",
        )
    turns: list[Turn] = []
    for i, raw_turn in enumerate(context):
        try:
            turns.append(Turn.model_validate(raw_turn))
        except ValidationError as exc:
            field, reason = explain_validation_error(exc)
            raise _fail(path, line, f"context[{i}]{field and '.' + field}", reason) from None
    if turns[-1].role != "assistant":
        raise _fail(
            path,
            line,
            f"context[{len(turns) - 1}].role",
            "the turn right before the item must be the agent's",
        )
    goal = None
    if rec.get("goal") is not None:
        try:
            goal = GoalCard.model_validate(rec["goal"])
        except ValidationError as exc:
            field, reason = explain_validation_error(exc)
            raise _fail(path, line, f"goal{field and '.' + field}", reason) from None
    return {
        "text": text,
        "history": tuple(turns),
        "goal": goal,
        "domain": str(rec.get("domain") or "written"),
    }


def read_gold_records(path: str | Path = GOLD_FILE) -> list[tuple[int, dict[str, Any]]]:
    """(line, record) of every line, checked field by field; corpus references are not resolved here."""
    path = Path(path)
    out: list[tuple[int, dict[str, Any]]] = []
    seen: dict[str, int] = {}
    for line, rec in iter_jsonl(path):
        if isinstance(rec, BadRecord):
            raise GoldError(str(rec))
        gid = rec.get("id")
        if not isinstance(gid, str) or not gid:
            raise _fail(path, line, "id", "missing or not a string")
        if gid in seen:
            raise _fail(path, line, "id", f"duplicate id {gid!r} (first on line {seen[gid]})")
        seen[gid] = line
        if rec.get("split") not in SPLITS:
            raise _fail(path, line, "split", f"expected one of {SPLITS}, got {rec.get('split')!r}")
        if rec.get("kind") not in KINDS:
            raise _fail(path, line, "kind", f"expected one of {KINDS}, got {rec.get('kind')!r}")
        rec = {**rec, "patterns": _check_patterns(path, line, rec.get("patterns"))}
        if rec["kind"] == "corpus":
            if not isinstance(rec.get("conversation_id"), str) or not rec["conversation_id"]:
                raise _fail(path, line, "conversation_id", "missing or not a string")
            if not isinstance(rec.get("turn"), int) or rec["turn"] < 0:
                raise _fail(path, line, "turn", "expected a turn index >= 0")
            if not isinstance(rec.get("source"), str):
                raise _fail(path, line, "source", "missing: which corpus the turn comes from")
        else:
            rec = {**rec, **_check_written(path, line, rec)}
        out.append((line, rec))
    if not out:
        raise GoldError(f"{path}: no gold records")
    return out


def _resolve(
    path: Path, records: Sequence[tuple[int, dict[str, Any]]], resolver: CorpusResolver
) -> tuple[list[GoldItem], dict[str, str]]:
    """(items, unavailable): items of a corpus that is absent on this machine are left out, and
    `unavailable` says which source, how many items and why."""
    by_source: dict[str, set[str]] = {}
    for _, rec in records:
        if rec["kind"] == "corpus":
            by_source.setdefault(rec["source"], set()).add(rec["conversation_id"])
    conversations = {}
    unavailable: dict[str, str] = {}
    for source, ids in by_source.items():
        try:
            conversations.update(resolver.fetch(source, sorted(ids)))
        except SourceUnavailable as exc:
            n = sum(1 for _, rec in records if rec.get("source") == source and rec["kind"] == "corpus")
            unavailable[source] = f"{n} items left out: {exc}"
        except DataError as exc:
            raise GoldError(f"{path}: {exc}") from None
    items: list[GoldItem] = []
    for line, rec in records:
        where = f"{path.name}:{line} {rec['id']}"
        if rec["kind"] == "corpus" and rec["source"] in unavailable:
            continue
        if rec["kind"] == "corpus":
            conv = conversations[rec["conversation_id"]]
            index = rec["turn"]
            if index >= len(conv.turns) or conv.turns[index].role != "user":
                raise _fail(path, line, "turn", f"{rec['conversation_id']} has no user turn {index}")
            context = TurnInContext(
                text=conv.turns[index].content,
                history=tuple(conv.turns[:index]),
                goal=conv.goal,
                domain=conv.domain,
                where=where,
            )
            items.append(
                GoldItem(
                    rec["id"],
                    rec["split"],
                    "corpus",
                    rec["source"],
                    str(rec.get("selection", "random")),
                    rec["patterns"],
                    context,
                    group_id(conv),
                )
            )
        else:
            context = TurnInContext(
                text=rec["text"], history=rec["history"], goal=rec["goal"], domain=rec["domain"], where=where
            )
            items.append(
                GoldItem(
                    rec["id"],
                    rec["split"],
                    "written",
                    "written",
                    "written",
                    rec["patterns"],
                    context,
                    dialogue=rec["id"],
                )
            )
    return items, unavailable


@functools.lru_cache(maxsize=4)
def _load_cached(path: Path, mtime: float) -> tuple[tuple[GoldItem, ...], dict[str, str]]:
    items, unavailable = _resolve(path, read_gold_records(path), CorpusResolver())
    for source, why in unavailable.items():
        log.warning("gold set %s: source %s unavailable, %s", path.name, source, why)
    return tuple(items), unavailable


def _checked(path: str | Path) -> Path:
    path = Path(path).resolve()
    if not path.exists():
        raise GoldError(f"{path}: gold file not found")
    return path


def load_gold(
    path: str | Path = GOLD_FILE, split: str | None = None, *, require_all: bool = False
) -> list[GoldItem]:
    """The gold items (optionally one split), corpus turns resolved; cached per file version.

    Items of a corpus that is not on this machine (CaSiNo without ../shared) are left out with a
    warning (`gold_unavailable` says which); `require_all=True` raises instead.
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown gold split {split!r}; known: {SPLITS}")
    path = _checked(path)
    items, unavailable = _load_cached(path, path.stat().st_mtime)
    if require_all and unavailable:
        raise GoldError(f"{path}: " + "; ".join(f"{s}: {why}" for s, why in unavailable.items()))
    return [item for item in items if split is None or item.split == split]


def gold_unavailable(path: str | Path = GOLD_FILE) -> dict[str, str]:
    """Sources whose gold items were left out on this machine, with how many and why ({} = none)."""
    path = _checked(path)
    return dict(_load_cached(path, path.stat().st_mtime)[1])


def label_matrix(label_sets: Iterable[Sequence[str]]) -> np.ndarray:
    """(n, 13) 0/1 matrix in PATTERN_NAMES order."""
    rows = [[1 if name in set(labels) else 0 for name in PATTERN_NAMES] for labels in label_sets]
    return np.asarray(rows, dtype=np.int64).reshape(-1, len(PATTERN_NAMES))
