"""The labelers' report card, the same for `mimesis label eval` and the `label` stage.

Three views, the cross-source one first because it is the one that says how labels hold on a
corpus nobody here labelled:

1. cross-source: fit on every gold source but one, score on the held-out real source
   (`crosssource`), for chit-chat and CaSiNo in turn;
2. CaSiNo's own strategy annotations on annotated dialogues never trained on (`strategies`), for
   the patterns they decide (`negotiation`, `pushback`);
3. in-distribution: the gold test split, as before, with the gold set's intra-annotator kappa;

and, where an independent second annotator labelled a sample of the real gold items blind
(`agreement.SecondOpinion`), how well that annotator reproduces the gold beside how well each
labeler, fitted without the source, does on the same items: the reachable level on that corpus.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.behavior.agreement import SecondOpinion, gold_agreement, second_opinions
from mimesis_rl.behavior.crosssource import SourceReport, cross_source, differences, markdown, summary
from mimesis_rl.behavior.evaluation import EvalReport, evaluate, interval_text, markdown_table
from mimesis_rl.behavior.gold import GOLD_FILE, SECOND_ANNOTATOR_FILE, gold_unavailable, load_gold
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.config import LabelSettings
from mimesis_rl.data.schema import PATTERN_NAMES

log = logging.getLogger(__name__)


def _clean(value: Any) -> Any:
    """NaN -> None, recursively, so the JSON stays standard."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


@dataclass
class LabelerEvaluation:
    in_distribution: list[EvalReport]
    kappa: dict[str, float]
    cross_source: dict[str, dict[str, SourceReport]] = field(default_factory=dict)
    annotations: dict[str, dict[str, Any]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # source -> the second annotator's scores and the labelers' on the same items (`beside_second_annotator`)
    second_annotator: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return _clean(
            {
                "cross_source_summary": summary(self.cross_source) if self.cross_source else {},
                "cross_source_differences": differences(self.cross_source),
                "cross_source": {
                    name: {src: rep.to_dict() for src, rep in per.items()}
                    for name, per in self.cross_source.items()
                },
                "casino_annotations": self.annotations,
                "reports": [r.to_dict() for r in self.in_distribution],
                "kappa": self.kappa,
                "second_annotator": self.second_annotator,
                "gold_unavailable": self.unavailable,
                "notes": self.notes,
            }
        )

    def metrics(self) -> dict[str, Any]:
        """Numbers for metrics/label.json and MLflow (nested; the runner flattens them)."""
        out: dict[str, Any] = {
            "eval": {
                r.labeler: {
                    "macro_f1": r.macro_f1,
                    "micro_f1": r.micro_f1,
                    **{name: s["f1"] for name, s in r.per_pattern.items()},
                }
                for r in self.in_distribution
            },
            "kappa": {k: v for k, v in self.kappa.items() if v == v},
        }
        if self.cross_source:
            out["cross_source"] = {}
            for name, per in self.cross_source.items():
                entry: dict[str, Any] = {
                    k: v for k, v in summary({name: per})[name].items() if v == v and k in ("min", "mean")
                }
                for src, rep in per.items():
                    ci = rep.interval
                    entry[src] = {
                        **({"macro_f1": rep.macro_f1} if rep.macro_f1 == rep.macro_f1 else {}),
                        **({"macro_f1_low": ci[0], "macro_f1_high": ci[1]} if ci else {}),
                        **{p: rep.report.per_pattern[p]["f1"] for p in rep.scored},
                    }
                out["cross_source"][name] = entry
        if self.second_annotator:
            out["second_annotator"] = {
                src: {
                    "macro_f1": entry["macro_f1"],
                    **{name: v["macro_f1"] for name, v in entry["labelers_cross_source"].items()},
                }
                for src, entry in self.second_annotator.items()
            }
        if self.annotations:
            out["casino_annotations"] = {
                name: {"mean_f1": check["mean_f1"], **{p: v["f1"] for p, v in check["patterns"].items()}}
                for name, check in self.annotations.items()
            }
        return out

    def markdown(self) -> str:
        parts = []
        if self.cross_source:
            parts.append(
                "### Cross-source (fit on the other gold sources, score on the held-out one)\n\n"
                + markdown(self.cross_source)
            )
        if self.annotations:
            first = next(iter(self.annotations.values()))
            head = f"{first['annotated_turns']} annotated turns of {first['dialogues']} dialogues"
            lines = [
                f"### CaSiNo strategy annotations ({head}, never trained on)\n",
                "| labeler | "
                + " | ".join(f"{p} (P/R/F1)" for p in first["patterns"])
                + " | mean F1 [95% interval] |",
                "|---|" + "---|" * (len(first["patterns"]) + 1),
            ]
            for name, check in self.annotations.items():
                cells = [
                    f"{v['precision']:.2f} / {v['recall']:.2f} / {v['f1']:.2f}"
                    for v in check["patterns"].values()
                ]
                ci = interval_text(check.get("mean_f1_ci"))
                lines.append(f"| {name} | " + " | ".join(cells) + f" | **{check['mean_f1']:.3f}**{ci} |")
            parts.append("\n".join(lines))
        if self.second_annotator:
            parts.append(self._second_annotator_markdown())
        n = self.in_distribution[0].n_items if self.in_distribution else 0
        parts.append(
            f"### In-distribution (gold test split, {n} turns)\n\n"
            + markdown_table(self.in_distribution, self.kappa)
        )
        parts.extend(f"Note: {note}" for note in self.notes)
        return "\n\n".join(parts)

    def _second_annotator_markdown(self) -> str:
        table = self.second_annotator
        names = list(self.cross_source)
        n = sum(entry["items"] for entry in table.values())
        lines = [
            f"### An independent second annotator (blind, from GUIDE.md) on {n} real gold turns\n",
            "| source | turns | patterns | second annotator vs gold | "
            + " | ".join(f"{name} (cross-source)" for name in names)
            + " |",
            "|---|---|---|---|" + "---|" * len(names),
        ]
        for src, entry in table.items():
            cells = [
                f"{entry['labelers_cross_source'][name]['macro_f1']:.3f}"
                f"{interval_text(entry['labelers_cross_source'][name]['macro_f1_ci'])}"
                if name in entry["labelers_cross_source"]
                else "–"
                for name in names
            ]
            lines.append(
                f"| {src} | {entry['items']} | {len(entry['patterns_scored'])} | "
                f"**{entry['macro_f1']:.3f}**{interval_text(entry['macro_f1_ci'])} | "
                + " | ".join(cells)
                + " |"
            )
        sources = list(table)
        lines += [
            "",
            "| pattern | " + " | ".join(f"{src}: F1 / kappa (gold positives)" for src in sources) + " |",
            "|---|" + "---|" * len(sources),
        ]
        for pattern in PATTERN_NAMES:
            cells = []
            for src in sources:
                v = table[src]["per_pattern"].get(pattern)
                cells.append(f"{v['f1']:.2f} / {v['kappa']:.2f} ({v['gold_positives']})" if v else "–")
            if any(c != "–" for c in cells):
                lines.append(f"| {pattern} | " + " | ".join(cells) + " |")
        lines.append(
            "\nMacro-F1 over the patterns with at least 3 gold positives among these turns; the sample "
            "over-represents positives of every pattern, so compare the columns with each other, not with "
            "the cross-source table above. Intervals: 95% bootstrap over dialogues."
        )
        return "\n".join(lines)


def beside_second_annotator(
    opinions: Mapping[str, SecondOpinion], cross: Mapping[str, Mapping[str, SourceReport]]
) -> dict[str, dict[str, Any]]:
    """source -> the second annotator's scores against the gold, and each labeler's cross-source
    macro-F1 (with its interval) on the same items."""
    out: dict[str, dict[str, Any]] = {}
    for source, opinion in opinions.items():
        labelers = {}
        for name, per in cross.items():
            if source in per:
                y_pred = per[source].predictions_for(opinion.ids)
                labelers[name] = {
                    "macro_f1": opinion.macro_f1(y_pred),
                    "macro_f1_ci": opinion.interval(y_pred),
                }
        out[source] = {**opinion.to_dict(), "labelers_cross_source": labelers}
    return out


def evaluate_labelers(
    config: LabelSettings,
    labelers: Mapping[str, Labeler],
    *,
    cross: bool = True,
    annotations: bool = True,
    encoder: Any | None = None,
) -> LabelerEvaluation:
    """Score the given (fitted) labelers in-distribution and on CaSiNo's annotations, and the same
    labeler kinds cross-source (trained ones refitted without the held-out source)."""
    from mimesis_rl.behavior.strategies import check_annotations

    gold = config.gold or GOLD_FILE
    test = load_gold(gold, split="test")
    result = LabelerEvaluation(
        in_distribution=[evaluate(labeler, test, name) for name, labeler in labelers.items()],
        kappa=gold_agreement(),
        unavailable=gold_unavailable(gold),
    )
    for source, why in result.unavailable.items():
        result.notes.append(f"gold source {source} unavailable here ({why}); its numbers are missing")
    if annotations:
        for name, labeler in labelers.items():
            try:
                result.annotations[name] = check_annotations(labeler)
            except FileNotFoundError as exc:
                result.notes.append(f"CaSiNo annotation check skipped: {exc}")
                break
    if cross:
        untrained = {n: lab for n, lab in labelers.items() if n not in ("embedding", "ensemble")}
        result.cross_source = cross_source(
            config, list(labelers), encoder=encoder, build_untrained=lambda name: untrained[name]
        )
    if config.gold is None and SECOND_ANNOTATOR_FILE.exists():
        opinions = second_opinions([i for i in load_gold(gold) if i.source != "written"])
        result.second_annotator = beside_second_annotator(opinions, result.cross_source)
    return result
