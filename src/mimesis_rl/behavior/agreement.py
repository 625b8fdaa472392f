"""Agreement on the gold labels: the annotator's two passes over the same items (Cohen's kappa per
pattern, an upper bound), and an independent second annotator's blind pass over a sample of the real
items (`SecondOpinion`): how well one careful reader following GUIDE.md reproduces the gold on a
corpus is the yardstick for what a labeler can be expected to reach there."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import cohen_kappa_score

from mimesis_rl.behavior.evaluation import macro_f1_of, scored_patterns_of
from mimesis_rl.behavior.gold.loader import (
    GOLD_FILE,
    PASS1_FILE,
    PASS2_FILE,
    SECOND_ANNOTATOR_FILE,
    GoldError,
    GoldItem,
    label_matrix,
    read_gold_records,
)
from mimesis_rl.behavior.taxonomy import unknown_patterns
from mimesis_rl.data.jsonl import BadRecord, iter_jsonl
from mimesis_rl.data.schema import PATTERN_NAMES
from mimesis_rl.stats import dialogue_interval


def read_label_file(path: str | Path) -> dict[str, tuple[str, ...]]:
    """id -> patterns from a JSONL of {"id", "patterns"}; bad lines raise GoldError naming file:line:field."""
    path = Path(path)
    out: dict[str, tuple[str, ...]] = {}
    for line, rec in iter_jsonl(path):
        if isinstance(rec, BadRecord):
            raise GoldError(str(rec))
        gid, patterns = rec.get("id"), rec.get("patterns")
        if not isinstance(gid, str) or not gid:
            raise GoldError(f"{path}:{line}: id: missing or not a string")
        if gid in out:
            raise GoldError(f"{path}:{line}: id: duplicate id {gid!r}")
        if not isinstance(patterns, list):
            raise GoldError(f"{path}:{line}: patterns: expected a list")
        unknown = unknown_patterns(patterns)
        if unknown:
            raise GoldError(f"{path}:{line}: patterns: unknown pattern names {unknown}")
        out[gid] = tuple(patterns)
    return out


def kappa_per_pattern(
    first: dict[str, tuple[str, ...]], second: dict[str, tuple[str, ...]]
) -> dict[str, float]:
    """Cohen's kappa of each pattern over the shared ids (NaN where neither pass ever used the pattern)."""
    if set(first) != set(second):
        only = sorted(set(first) ^ set(second))
        raise GoldError(f"the two passes label different items, e.g. {only[:3]}")
    ids = sorted(first)
    out: dict[str, float] = {}
    for name in PATTERN_NAMES:
        a = [int(name in first[i]) for i in ids]
        b = [int(name in second[i]) for i in ids]
        if sum(a) + sum(b) == 0:
            out[name] = math.nan
        elif a == b:
            out[name] = 1.0
        else:
            out[name] = float(cohen_kappa_score(a, b))
    return out


def gold_agreement(pass1: str | Path = PASS1_FILE, pass2: str | Path = PASS2_FILE) -> dict[str, float]:
    """Kappa per pattern plus `macro` (their mean) and `items` for the packaged two passes."""
    first, second = read_label_file(pass1), read_label_file(pass2)
    kappas = kappa_per_pattern(first, second)
    defined = [v for v in kappas.values() if not math.isnan(v)]
    return {
        **kappas,
        "macro": sum(defined) / len(defined) if defined else math.nan,
        "items": float(len(first)),
    }


@dataclass
class SecondOpinion:
    """An independent annotator's labels for the gold items of one real source, beside the gold's.
    `scored`: the patterns with at least `min_support` gold positives among these items."""

    source: str
    ids: list[str]
    y_gold: np.ndarray
    y_second: np.ndarray
    dialogues: list[str]
    scored: list[str]

    @property
    def columns(self) -> list[int]:
        return [PATTERN_NAMES.index(name) for name in self.scored]

    def macro_f1(self, y_pred: np.ndarray | None = None) -> float:
        """Macro-F1 against the gold over the scored patterns: of the second annotator, or of `y_pred`
        (a labeler's predictions for the same items, in the same order)."""
        return macro_f1_of(self.y_gold, self.y_second if y_pred is None else y_pred, self.columns)

    def interval(self, y_pred: np.ndarray | None = None) -> list[float] | None:
        """95% bootstrap interval of `macro_f1` over the items' dialogues."""
        y, gold, columns = self.y_second if y_pred is None else y_pred, self.y_gold, self.columns
        return dialogue_interval(self.dialogues, lambda rows: macro_f1_of(gold[rows], y[rows], columns))

    def per_pattern(self) -> dict[str, dict[str, float]]:
        """F1 of the second annotator against the gold and Cohen's kappa, per scored pattern."""
        out = {}
        for name, k in zip(self.scored, self.columns, strict=True):
            gold, second = self.y_gold[:, k], self.y_second[:, k]
            out[name] = {
                "f1": macro_f1_of(gold[:, None], second[:, None], [0]),
                "kappa": 1.0 if (gold == second).all() else float(cohen_kappa_score(gold, second)),
                "gold_positives": int(gold.sum()),
                "second_positives": int(second.sum()),
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": len(self.ids),
            "macro_f1": self.macro_f1(),
            "macro_f1_ci": self.interval(),
            "patterns_scored": self.scored,
            "per_pattern": self.per_pattern(),
        }


def second_opinions(
    items: Sequence[GoldItem],
    path: str | Path = SECOND_ANNOTATOR_FILE,
    gold: str | Path = GOLD_FILE,
    min_support: int = 3,
) -> dict[str, SecondOpinion]:
    """source -> the second annotator's labels on that source's items among `items`. Every id in the
    file must be a gold id; items of a source unavailable here are simply not among `items`."""
    second = read_label_file(path)
    unknown = sorted(set(second) - {rec["id"] for _, rec in read_gold_records(gold)})
    if unknown:
        raise GoldError(f"{path}: id: not in {Path(gold).name}: {unknown[:3]}")
    out: dict[str, SecondOpinion] = {}
    for source in sorted({item.source for item in items if item.id in second}):
        chosen = [item for item in items if item.source == source and item.id in second]
        y_gold = label_matrix([item.patterns for item in chosen])
        scored = scored_patterns_of(y_gold, min_support)
        out[source] = SecondOpinion(
            source,
            [item.id for item in chosen],
            y_gold,
            label_matrix([second[item.id] for item in chosen]),
            [item.dialogue or item.id for item in chosen],
            scored,
        )
    return out
