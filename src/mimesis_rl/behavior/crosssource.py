"""Cross-source evaluation: fit on every gold source but one, score on the one held out.

The gold test split shares hands, sources and phrasing with the train split, so its macro-F1 says
little about a corpus nobody here labelled. Here each real source (chit-chat, CaSiNo) is held out
in turn: the trained labelers are fitted on the gold items of the *other* sources (both splits),
weak labels from CaSiNo's annotations join only when CaSiNo is not the one held out, and every
labeler is scored on all gold items of the held-out source. Thresholds and ensemble weights are
fitted inside that training data too (out-of-source, see `EmbeddingLabeler.fit`), so nothing of
the held-out source touches any choice.

A source rarely shows all 13 patterns: its macro-F1 averages the patterns with at least
MIN_SUPPORT positives in it (the patterns scored are listed with every number); a pattern it
lacks cannot be scored there, only wrongly predicted, which still lowers the precision of the
patterns that are scored.

With 3 to 90 positives per pattern in a held-out source, a macro-F1 moves by a few hundredths
when a handful of turns change, so every number carries a 95% bootstrap interval over the source's
dialogues, and each labeler's difference to the first one is paired: both are scored on the same
resamples, which is what tells a better labeler from a luckier one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from mimesis_rl.behavior.evaluation import (
    EvalReport,
    evaluate_predictions,
    interval_text,
    macro_f1_of,
    scored_patterns_of,
)
from mimesis_rl.behavior.gold import GOLD_FILE, GoldItem, label_matrix, load_gold
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.config import LabelSettings
from mimesis_rl.data.schema import PATTERN_NAMES
from mimesis_rl.stats import dialogue_interval

log = logging.getLogger(__name__)
REAL_SOURCES = ("chitchat", "casino")
MIN_SUPPORT = 3
RESAMPLES = 1000


@dataclass
class SourceReport:
    """One labeler scored on one held-out source."""

    labeler: str
    held_out: str
    report: EvalReport
    scored: list[str]  # patterns with >= MIN_SUPPORT positives in the held-out source
    trained_on: dict[str, int]
    y_true: np.ndarray | None = field(default=None, repr=False)
    y_pred: np.ndarray | None = field(default=None, repr=False)
    dialogues: list[str] | None = field(default=None, repr=False)  # bootstrap unit of each turn
    ids: list[str] | None = field(default=None, repr=False)  # gold id of each turn
    _paired: dict[str, list[float] | None] = field(default_factory=dict, repr=False, compare=False)

    @property
    def macro_f1(self) -> float:
        if not self.scored:
            return float("nan")
        return float(np.mean([self.report.per_pattern[name]["f1"] for name in self.scored]))

    def predictions_for(self, ids: Sequence[str]) -> np.ndarray:
        """The labeler's predictions for the given gold ids (all scored here), in their order."""
        if self.y_pred is None or self.ids is None:
            raise ValueError(f"{self.labeler} on {self.held_out}: predictions were not kept")
        row = {gid: i for i, gid in enumerate(self.ids)}
        missing = [gid for gid in ids if gid not in row]
        if missing:
            raise ValueError(f"{self.labeler} on {self.held_out}: not scored here: {missing[:3]}")
        return self.y_pred[[row[gid] for gid in ids]]

    def macro_f1_on(self, rows: np.ndarray) -> float:
        """Macro-F1 over the scored patterns on the given rows (a resample)."""
        if self.y_true is None or self.y_pred is None:
            raise ValueError(f"{self.labeler} on {self.held_out}: predictions were not kept")
        columns = [PATTERN_NAMES.index(name) for name in self.scored]
        return macro_f1_of(self.y_true[rows], self.y_pred[rows], columns)

    @cached_property
    def interval(self) -> list[float] | None:
        """95% interval of the macro-F1 over resampled dialogues of the held-out source."""
        return paired_interval(self, None)

    def interval_minus(self, baseline: SourceReport) -> list[float] | None:
        """The paired interval of macro-F1 minus `baseline`'s (computed once per baseline labeler)."""
        if baseline.labeler not in self._paired:
            self._paired[baseline.labeler] = paired_interval(self, baseline)
        return self._paired[baseline.labeler]

    def to_dict(self) -> dict[str, Any]:
        return {
            "labeler": self.labeler,
            "held_out": self.held_out,
            "n_items": self.report.n_items,
            "macro_f1": self.macro_f1,
            "macro_f1_ci": self.interval,
            "patterns_scored": self.scored,
            "trained_on": self.trained_on,
            "per_pattern": {
                name: {k: self.report.per_pattern[name][k] for k in ("precision", "recall", "f1", "support")}
                for name in PATTERN_NAMES
            },
        }


def paired_interval(
    report: SourceReport, baseline: SourceReport | None, resamples: int = RESAMPLES, seed: int = 0
) -> list[float] | None:
    """95% bootstrap interval over the held-out source's dialogues of `report`'s macro-F1, or, with a
    `baseline` scored on the same turns, of the difference report - baseline on the same resamples.
    None when there is nothing to resample (no scored pattern, fewer than two dialogues)."""
    dialogues = report.dialogues
    if not report.scored or not dialogues:
        return None
    if baseline is not None and (baseline.held_out != report.held_out or baseline.dialogues != dialogues):
        raise ValueError("a paired interval needs both labelers scored on the same held-out turns")

    def statistic(rows: np.ndarray) -> float:
        value = report.macro_f1_on(rows)
        return value - baseline.macro_f1_on(rows) if baseline is not None else value

    return dialogue_interval(dialogues, statistic, resamples, seed)


def differences(results: dict[str, dict[str, SourceReport]]) -> dict[str, dict[str, dict[str, Any]]]:
    """labeler -> held-out source -> its macro-F1 minus the first labeler's, with the paired interval."""
    names = list(results)
    if len(names) < 2:
        return {}
    base = names[0]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in names[1:]:
        out[name] = {}
        for src, rep in results[name].items():
            other = results[base].get(src)
            if other is None:
                continue
            out[name][src] = {
                "minus": base,
                "difference": rep.macro_f1 - other.macro_f1,
                "ci": rep.interval_minus(other),
            }
    return out


def scored_patterns(items: Sequence[GoldItem], min_support: int = MIN_SUPPORT) -> list[str]:
    """Patterns with at least `min_support` positives among the items."""
    return scored_patterns_of(label_matrix([item.patterns for item in items]), min_support)



def cross_source(
    config: LabelSettings,
    names: Sequence[str],
    *,
    encoder: Any | None = None,
    items: Sequence[GoldItem] | None = None,
    sources: Sequence[str] = REAL_SOURCES,
    build_untrained: Callable[[str], Labeler] | None = None,
) -> dict[str, dict[str, SourceReport]]:
    """labeler -> held-out source -> its scores. Sources absent from the gold set (CaSiNo without
    ../shared) are skipped. `build_untrained(name)` makes rules/llm (default: `build_labeler`)."""
    from mimesis_rl.behavior.labelers.factory import build_labeler, fit_offline, training_data

    items = list(load_gold(config.gold or GOLD_FILE) if items is None else items)
    present = [s for s in sources if any(item.source == s for item in items)]
    out: dict[str, dict[str, SourceReport]] = {name: {} for name in names}
    trained = [n for n in names if n in ("embedding", "ensemble")]
    owned = build_untrained is None  # labelers built here are closed here
    make = build_untrained or (lambda name: build_labeler(name, config))
    untrained = {n: make(n) for n in names if n not in trained}
    if trained:
        encoder = encoder or config.embedding.encoder()
    try:
        for held in present:
            test = [item for item in items if item.source == held]
            train = [item for item in items if item.source != held]
            labelers: dict[str, Labeler] = dict(untrained)
            if trained:
                data = training_data(config, train, weak=config.weak_labels and held != "casino")
                fitted = fit_offline(config, encoder=encoder, data=data)
                counts = data.counts
                labelers.update(embedding=fitted.embedding, ensemble=fitted.ensemble)
            else:
                counts = {
                    f"gold_{s}": sum(1 for i in train if i.source == s) for s in {i.source for i in train}
                }
            y_true = label_matrix([item.patterns for item in test])
            contexts = [item.context for item in test]
            dialogues = [item.dialogue or item.id for item in test]
            scored = scored_patterns(test)
            for name in names:
                y_pred = labelers[name].predict(contexts)
                report = evaluate_predictions(name, y_true, y_pred)
                out[name][held] = SourceReport(
                    name,
                    held,
                    report,
                    scored,
                    dict(sorted(counts.items())),
                    y_true,
                    y_pred,
                    dialogues,
                    [item.id for item in test],
                )
                log.info(
                    "%s held out %s (%d turns): macro-F1 %.3f over %d patterns",
                    name,
                    held,
                    len(test),
                    out[name][held].macro_f1,
                    len(scored),
                )
    finally:
        if owned:
            for labeler in untrained.values():
                labeler.close()
    return out


def summary(results: dict[str, dict[str, SourceReport]]) -> dict[str, dict[str, Any]]:
    """labeler -> {source: macro-F1, ..., source_ci: its interval, ..., 'min': worst source, 'mean':
    mean over held-out sources}."""
    out: dict[str, dict[str, Any]] = {}
    for name, per_source in results.items():
        values = {src: rep.macro_f1 for src, rep in per_source.items()}
        finite = [v for v in values.values() if v == v]
        out[name] = {
            **values,
            **{f"{src}_ci": rep.interval for src, rep in per_source.items()},
            "min": float(min(finite)) if finite else float("nan"),
            "mean": float(np.mean(finite)) if finite else float("nan"),
        }
    return out


def markdown(results: dict[str, dict[str, SourceReport]]) -> str:
    """Per pattern and held-out source, the F1 of each labeler; macro-F1 (scored patterns) last."""
    names = list(results)
    sources = [s for s in REAL_SOURCES if any(s in results[n] for n in names)]
    if not sources:
        return "(no real source available for a cross-source evaluation)"
    head = ["pattern", *[f"{n} ({s} held out)" for s in sources for n in names], "positives"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    first = results[names[0]]
    for pattern in PATTERN_NAMES:
        cells = []
        for src in sources:
            for name in names:
                rep = results[name][src]
                cells.append(f"{rep.report.per_pattern[pattern]['f1']:.2f}" if pattern in rep.scored else "–")
        support = ", ".join(
            f"{src} {int(first[src].report.per_pattern[pattern]['support'])}" for src in sources
        )
        lines.append(f"| {pattern} | " + " | ".join(cells) + f" | {support} |")
    macro = [
        f"**{rep.macro_f1:.3f}**{interval_text(rep.interval)}"
        for s in sources
        for rep in (results[n][s] for n in names)
    ]
    lines.append("| **macro-F1** [95% interval] | " + " | ".join(macro) + " | |")
    paired = differences(results)
    if paired:
        cells = []
        for s in sources:
            cells.append("")
            for n in names[1:]:
                d = paired[n].get(s)
                cells.append(f"{d['difference']:+.3f}{interval_text(d['ci'], signed=True)}" if d else "")
        lines.append(f"| minus {names[0]} (paired) | " + " | ".join(cells) + " | |")
    note = "\nIntervals: 95% bootstrap over the held-out source's dialogues"
    if paired:
        note += (
            "; the paired row scores both labelers on the same resamples"
            " (an interval that holds 0 is no difference)"
        )
    lines.append(note + ".")
    return "\n".join(lines)
