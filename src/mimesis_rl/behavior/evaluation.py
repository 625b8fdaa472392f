"""Scores of a labeler against gold labels: per-pattern precision/recall/F1, macro-F1, and a confusion view.

Multi-label turns have no single confusion matrix; the one used here counts, for every gold
pattern (row), how often each pattern was predicted on the same turns (column), plus a `none`
row and column for turns without any gold or predicted pattern. Its diagonal is recall-like and
its off-diagonal cells show which patterns get mistaken for which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.metrics import f1_score, precision_recall_fscore_support

from mimesis_rl.behavior.gold.loader import GoldItem, label_matrix
from mimesis_rl.data.schema import PATTERN_NAMES
from mimesis_rl.stats import dialogue_interval

if TYPE_CHECKING:
    from mimesis_rl.behavior.labelers.base import Labeler

CONFUSION_LABELS = (*PATTERN_NAMES, "none")


@dataclass
class EvalReport:
    labeler: str
    n_items: int
    per_pattern: dict[str, dict[str, float]]
    macro_f1: float
    micro_f1: float
    exact_match: float
    confusion: np.ndarray = field(repr=False)
    row_support: np.ndarray = field(
        repr=False
    )  # turns per confusion row: each pattern's support, then `none`
    macro_f1_ci: list[float] | None = None  # 95% bootstrap interval over the items' dialogues

    def as_metrics(self, prefix: str | None = None) -> dict[str, float]:
        """Flat numbers for MLflow: `<labeler>.<pattern>.f1`, `<labeler>.macro_f1`, ..."""
        p = prefix or self.labeler
        out = {
            f"{p}.macro_f1": self.macro_f1,
            f"{p}.micro_f1": self.micro_f1,
            f"{p}.exact_match": self.exact_match,
        }
        for name, scores in self.per_pattern.items():
            for key in ("precision", "recall", "f1"):
                out[f"{p}.{name}.{key}"] = scores[key]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "labeler": self.labeler,
            "n_items": self.n_items,
            "macro_f1": self.macro_f1,
            "macro_f1_ci": self.macro_f1_ci,
            "micro_f1": self.micro_f1,
            "exact_match": self.exact_match,
            "per_pattern": self.per_pattern,
            "confusion": {"labels": list(CONFUSION_LABELS), "counts": self.confusion.tolist()},
        }


def macro_f1_of(y_true: np.ndarray, y_pred: np.ndarray, columns: Sequence[int] | None = None) -> float:
    """Mean F1 over `columns` (default: all); a column with no positive and no prediction (possible in a
    bootstrap resample) has no F1 and is left out of the mean."""
    columns = list(range(np.shape(y_true)[1])) if columns is None else list(columns)
    y_true, y_pred = np.asarray(y_true, bool)[:, columns], np.asarray(y_pred, bool)[:, columns]
    tp = (y_true & y_pred).sum(0)
    wrong = (y_true ^ y_pred).sum(0)
    defined = (2 * tp + wrong) > 0
    if not defined.any():
        return float("nan")
    return float(np.mean(2 * tp[defined] / (2 * tp[defined] + wrong[defined])))


def scored_patterns_of(y_true: np.ndarray, min_support: int) -> list[str]:
    """Patterns with at least `min_support` positives in a (n, 13) label matrix: those a macro-F1 over a
    corpus (or a sample of it) can score."""
    counts = np.asarray(y_true).sum(0)
    return [name for name, n in zip(PATTERN_NAMES, counts, strict=True) if n >= min_support]


def confusion_counts(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """(14, 14) co-occurrence of gold patterns (rows) and predicted patterns (columns), `none` last."""
    true_ext = np.hstack([y_true, (y_true.sum(1) == 0)[:, None]]).astype(np.int64)
    pred_ext = np.hstack([y_pred, (y_pred.sum(1) == 0)[:, None]]).astype(np.int64)
    return true_ext.T @ pred_ext


def evaluate_predictions(labeler: str, y_true: np.ndarray, y_pred: np.ndarray) -> EvalReport:
    y_true, y_pred = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    if y_true.shape != y_pred.shape or y_true.shape[1:] != (len(PATTERN_NAMES),):
        raise ValueError(
            f"label matrices must both be (n, {len(PATTERN_NAMES)}), got {y_true.shape} and {y_pred.shape}"
        )
    precision, recall, f1, support = precision_recall_fscore_support(
        y_true, y_pred, average=None, zero_division=0
    )
    per = {
        name: {
            "precision": float(precision[i]),
            "recall": float(recall[i]),
            "f1": float(f1[i]),
            "support": float(support[i]),
            "predicted": float(y_pred[:, i].sum()),
        }
        for i, name in enumerate(PATTERN_NAMES)
    }
    return EvalReport(
        labeler=labeler,
        n_items=int(len(y_true)),
        per_pattern=per,
        macro_f1=float(np.mean(f1)),
        micro_f1=float(f1_score(y_true, y_pred, average="micro", zero_division=0)),
        exact_match=float(np.mean(np.all(y_true == y_pred, axis=1))) if len(y_true) else 0.0,
        confusion=confusion_counts(y_true, y_pred),
        row_support=np.append(y_true.sum(0), (y_true.sum(1) == 0).sum()).astype(float),
    )


def evaluate(labeler: Labeler, items: Sequence[GoldItem], name: str | None = None) -> EvalReport:
    """Label the gold items' turns and score them against their gold patterns."""
    y_true = label_matrix([item.patterns for item in items])
    y_pred = labeler.predict([item.context for item in items])
    report = evaluate_predictions(name or labeler.name, y_true, y_pred)
    report.macro_f1_ci = dialogue_interval(
        [item.dialogue or item.id for item in items], lambda rows: macro_f1_of(y_true[rows], y_pred[rows])
    )
    return report


def interval_text(ci: Sequence[float] | None, signed: bool = False) -> str:
    """' [low, high]' for a table cell, or '' without an interval."""
    if ci is None:
        return ""
    fmt = "{:+.2f}" if signed else "{:.2f}"
    return f" [{fmt.format(ci[0])}, {fmt.format(ci[1])}]"


def markdown_table(reports: Sequence[EvalReport], kappa: dict[str, float] | None = None) -> str:
    """Per-pattern F1 of every labeler side by side, macro-F1 last (and Cohen's kappa when given)."""
    head = ["pattern", *[r.labeler for r in reports], *(["kappa"] if kappa else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in PATTERN_NAMES:
        cells = [f"{r.per_pattern[name]['f1']:.2f}" for r in reports]
        if kappa:
            value = kappa.get(name, float("nan"))
            cells.append("n/a" if value != value else f"{value:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append(
        "| **macro-F1** [95% interval] | "
        + " | ".join(f"**{r.macro_f1:.3f}**{interval_text(r.macro_f1_ci)}" for r in reports)
        + (f" | {kappa.get('macro', float('nan')):.2f}" if kappa else "")
        + " |"
    )
    return "\n".join(lines)
