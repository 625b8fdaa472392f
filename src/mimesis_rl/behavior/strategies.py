"""CaSiNo's own strategy annotations as an independent check on two of our patterns, and as weak labels.

CaSiNo (Chawla et al., NAACL 2021) annotates the messages of 396 of its dialogues with persuasion
strategies. Two of them correspond to our patterns closely enough to decide a label
(GUIDE.md, "CaSiNo's strategy annotations", says why the others do not):

- `promote-coordination` ("an explicit offer of a trade or mutual concession, or a remark suggesting
  to work together towards a deal") -> `negotiation`;
- `uv-part` ("undervalue the partner's needs": "you can find wood in the forest") -> `pushback`.

A message annotated with a mapped strategy is a positive of its pattern; a message whose
strategies are all *neutral* (small-talk, showing-empathy, elicit-pref: rapport and questions,
never an offer or a contest) is a negative; every other message (non-strategic, self-need,
vouch-fair, ...) leaves the pattern undecided, because such messages often carry a plain offer or
argument the annotation scheme does not mark. The check scores a labeler on the decided messages
of the annotated dialogues in `casino_valid.json` and `casino_test.json`; weak labels for
training come only from annotated dialogues of `casino_train.json`, and the hand-labelled CaSiNo
gold items only from dialogues without annotations, so nothing of the check is ever trained on.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.gold.resolve import casino_dir
from mimesis_rl.data.schema import PATTERN_NAMES, Conversation
from mimesis_rl.stats import dialogue_interval

MAPPED: dict[str, tuple[str, ...]] = {
    "negotiation": ("promote-coordination",),
    "pushback": ("uv-part",),
}
NEUTRAL = frozenset({"small-talk", "showing-empathy", "elicit-pref"})
CHECK_FILES = ("casino_valid.json", "casino_test.json")
WEAK_FILES = ("casino_train.json",)


class Predicts(Protocol):
    """What the check needs of a labeler (`behavior.labelers.Labeler` is one): the labelers train on this
    module's weak labels, so it names no labeler class."""

    def predict(self, contexts: Sequence[TurnInContext]) -> np.ndarray: ...


@dataclass(frozen=True)
class AnnotatedTurn:
    """One annotated CaSiNo message as its speaker's user turn, with the strategies it was given."""

    conversation_id: str
    turn: int
    context: TurnInContext
    strategies: frozenset[str]

    def decided(self, pattern: str) -> int | None:
        """1 / 0 when the annotation decides `pattern` (see the module docstring), else None."""
        if any(s in self.strategies for s in MAPPED[pattern]):
            return 1
        if self.strategies and self.strategies <= NEUTRAL:
            return 0
        return None


@functools.lru_cache(maxsize=4)
def _read(path: Path, mtime: float) -> tuple[AnnotatedTurn, ...]:
    from mimesis_rl.data.adapters import get_adapter

    out: list[AnnotatedTurn] = []
    for conv in get_adapter("casino").read(str(path)):
        if not isinstance(conv, Conversation):
            continue
        for index, turn in enumerate(conv.turns):
            strategies = turn.meta.get("strategies") if turn.role == "user" else None
            if not strategies:
                continue
            out.append(
                AnnotatedTurn(
                    conv.conversation_id,
                    index,
                    TurnInContext(
                        text=turn.content,
                        history=tuple(conv.turns[:index]),
                        goal=conv.goal,
                        domain=conv.domain,
                        where=f"{path.name} {conv.conversation_id} turn {index}",
                    ),
                    frozenset(strategies),
                )
            )
    return tuple(out)


def annotated_turns(files: Sequence[str], folder: Path | None = None) -> list[AnnotatedTurn]:
    """Annotated messages of the given CaSiNo files (each message once, in its speaker's view);
    FileNotFoundError naming the file when one is missing."""
    folder = folder or casino_dir()
    out: list[AnnotatedTurn] = []
    for name in files:
        path = folder / name
        if not path.exists():
            raise FileNotFoundError(f"{path}: CaSiNo file not found (strategy annotations need it)")
        out.extend(_read(path, path.stat().st_mtime))
    return out


def weak_labels(
    folder: Path | None = None, files: Sequence[str] = WEAK_FILES
) -> tuple[list[TurnInContext], np.ndarray, np.ndarray]:
    """(contexts, y, mask) from the annotations of `files`: mask is 1 only for the mapped patterns a
    message's annotation decides; messages deciding none are left out."""
    contexts, rows, masks = [], [], []
    for turn in annotated_turns(files, folder):
        y = np.zeros(len(PATTERN_NAMES), dtype=np.int64)
        m = np.zeros(len(PATTERN_NAMES), dtype=np.int64)
        for pattern in MAPPED:
            value = turn.decided(pattern)
            if value is not None:
                k = PATTERN_NAMES.index(pattern)
                y[k], m[k] = value, 1
        if m.any():
            contexts.append(turn.context)
            rows.append(y)
            masks.append(m)
    shape = (len(rows), len(PATTERN_NAMES))
    return contexts, np.asarray(rows).reshape(shape), np.asarray(masks).reshape(shape)


def _counts(gold: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    tp = int((gold & pred).sum())
    precision = tp / max(int(pred.sum()), 1)
    recall = tp / max(int(gold.sum()), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "positives": int(gold.sum()),
        "negatives": int(len(gold) - gold.sum()),
    }


def check_annotations(
    labeler: Predicts, folder: Path | None = None, files: Sequence[str] = CHECK_FILES
) -> dict[str, Any]:
    """Precision, recall and F1 of each mapped pattern on the decided messages of the annotated
    dialogues in `files` (never used in training), and their mean F1."""
    turns = annotated_turns(files, folder)
    predicted = labeler.predict([t.context for t in turns]) if turns else np.zeros((0, len(PATTERN_NAMES)))
    dialogues = [t.conversation_id.rsplit("-", 1)[0] for t in turns]  # both speakers' views: one unit
    out: dict[str, Any] = {
        "files": list(files),
        "dialogues": len(set(dialogues)),
        "annotated_turns": len(turns),
        "mapping": {p: list(s) for p, s in MAPPED.items()},
        "neutral": sorted(NEUTRAL),
        "patterns": {},
    }
    # gold[i, j]: 1 / 0 where turn i's annotation decides the j-th mapped pattern, -1 where it is silent
    decided = [[t.decided(p) for p in MAPPED] for t in turns]
    gold = np.array([[-1 if v is None else v for v in row] for row in decided], dtype=np.int64)
    gold = gold.reshape(len(turns), len(MAPPED))
    columns = [PATTERN_NAMES.index(p) for p in MAPPED]
    pred = np.asarray(predicted, dtype=np.int64).reshape(len(turns), len(PATTERN_NAMES))[:, columns]
    f1s = []
    for j, pattern in enumerate(MAPPED):
        rows = gold[:, j] >= 0
        counts = _counts(gold[rows, j], pred[rows, j])
        f1s.append(counts["f1"])
        out["patterns"][pattern] = counts

    def mean_f1(rows: np.ndarray) -> float:
        values = []
        for j in range(len(MAPPED)):
            picked = rows[gold[rows, j] >= 0]
            values.append(_counts(gold[picked, j], pred[picked, j])["f1"])
        return float(np.mean(values))

    out["mean_f1_ci"] = dialogue_interval(dialogues, mean_f1)
    out["mean_f1"] = float(np.mean(f1s)) if f1s else 0.0
    return out
