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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mimesis_rl.behavior.evaluation import EvalReport, evaluate_predictions
from mimesis_rl.behavior.gold import GOLD_FILE, GoldItem, label_matrix, load_gold
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.config import LabelConfig
from mimesis_rl.data.schema import PATTERN_NAMES

log = logging.getLogger(__name__)
REAL_SOURCES = ("chitchat", "casino")
MIN_SUPPORT = 3


@dataclass
class SourceReport:
    """One labeler scored on one held-out source."""

    labeler: str
    held_out: str
    report: EvalReport
    scored: list[str]  # patterns with >= MIN_SUPPORT positives in the held-out source
    trained_on: dict[str, int]

    @property
    def macro_f1(self) -> float:
        if not self.scored:
            return float("nan")
        return float(np.mean([self.report.per_pattern[name]["f1"] for name in self.scored]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "labeler": self.labeler,
            "held_out": self.held_out,
            "n_items": self.report.n_items,
            "macro_f1": self.macro_f1,
            "patterns_scored": self.scored,
            "trained_on": self.trained_on,
            "per_pattern": {
                name: {k: self.report.per_pattern[name][k] for k in ("precision", "recall", "f1", "support")}
                for name in PATTERN_NAMES
            },
        }


def scored_patterns(items: Sequence[GoldItem], min_support: int = MIN_SUPPORT) -> list[str]:
    """Patterns with at least `min_support` positives among the items."""
    y = label_matrix([item.patterns for item in items])
    return [name for name, n in zip(PATTERN_NAMES, y.sum(0), strict=True) if n >= min_support]


def cross_source(
    config: LabelConfig,
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
            scored = scored_patterns(test)
            for name in names:
                report = evaluate_predictions(name, y_true, labelers[name].predict(contexts))
                out[name][held] = SourceReport(name, held, report, scored, dict(sorted(counts.items())))
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


def summary(results: dict[str, dict[str, SourceReport]]) -> dict[str, dict[str, float]]:
    """labeler -> {source: macro-F1, ..., 'min': worst source, 'mean': mean over held-out sources}."""
    out: dict[str, dict[str, float]] = {}
    for name, per_source in results.items():
        values = {src: rep.macro_f1 for src, rep in per_source.items()}
        finite = [v for v in values.values() if v == v]
        out[name] = {
            **values,
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
    macro = [f"**{results[n][s].macro_f1:.3f}**" for s in sources for n in names]
    lines.append("| **macro-F1** | " + " | ".join(macro) + " | |")
    return "\n".join(lines)
