"""Stage `label`: the 13 behaviour patterns on every user turn of the splits, and the labelers' report card.

    python -m tasks.label [--profile tiny]

1. When the backend or the evaluation needs them, fit the trained labelers on the gold `train`
   split and CaSiNo's weak labels (embedding classifiers, ensemble weights) and save them under
   `label.model_dir` (DVC versions the folder, MLflow gets a copy); `status.json` there says what
   was fitted on which gold.
2. Score every labeler of `label.evaluate` (`mimesis_rl.behavior.report`): cross-source first (each
   real gold source held out in turn, trained labelers refitted without it; `label.cross_source`),
   then on CaSiNo's own strategy annotations (dialogues never trained on), then on the gold `test`
   split: per-pattern precision/recall/F1, macro-F1, Markdown tables (`labelers.md`, JSON beside
   it), an F1 heatmap and a gold-vs-predicted confusion PNG per labeler; plus Cohen's kappa of the
   gold set's two labelling passes. CaSiNo lives outside the project (../shared): without it its
   gold items and the annotation check are left out, and the report says so.
3. Label `data/processed/splits/{train,val,test}.jsonl` with `label.backend` into
   `data/processed/labeled/` (swapped in only when every split is written; bad records quarantined
   to `<report_dir>/quarantine.jsonl`), and report the pattern distribution per source and domain
   (metrics and a bar chart).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import mlflow

from mimesis_rl.behavior.gold import GOLD_FILE
from mimesis_rl.behavior.labelers import LabelSettings, build_labeler, fit_offline, save_fitted
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.rules import RulesLabeler
from mimesis_rl.behavior.labeling import LabelStats, label_file
from mimesis_rl.behavior.plots import plot_confusion, plot_cross_source, plot_distribution, plot_f1
from mimesis_rl.behavior.report import LabelerEvaluation
from mimesis_rl.behavior.report import evaluate_labelers as report_card
from mimesis_rl.data.jsonl import write_jsonl
from mimesis_rl.fsutil import swap_in_dir, write_json, write_text
from mimesis_rl.tracking.lineage import content_hash
from tasks._runner import main

STAGE = "label"
log = logging.getLogger("mimesis.label")


def inputs(params: dict[str, Any]) -> list[str]:
    """The splits, the gold file and CaSiNo's files (gold references, weak labels, annotation check)."""
    from mimesis_rl.behavior.gold.resolve import CASINO_FILES, casino_dir

    config = LabelSettings.from_params(params)
    return [
        *(str(Path(config.input_dir) / f"{split}.jsonl") for split in config.splits),
        str(config.gold or GOLD_FILE),
        *(str(casino_dir() / name) for name in CASINO_FILES),
    ]


def _log_artifact(path: Path, folder: str) -> None:
    if mlflow.active_run() is not None:
        mlflow.log_artifact(str(path), artifact_path=folder)


def evaluate_labelers(
    config: LabelSettings, labelers: dict[str, Labeler], encoder: Any = None
) -> LabelerEvaluation:
    """The report card (cross-source, CaSiNo annotations, gold test split), written and logged."""
    report_dir = Path(config.report_dir)
    result = report_card(config, labelers, cross=config.cross_source, encoder=encoder)
    for report in result.in_distribution:
        _log_artifact(plot_confusion(report, report_dir / f"confusion_{report.labeler}.png"), "label/plots")
        log.info("%s: macro-F1 %.3f on %d gold test turns", report.labeler, report.macro_f1, report.n_items)
    table = result.markdown()
    write_text(report_dir / "labelers.md", table + "\n")
    write_json(report_dir / "labelers.json", result.to_dict())
    _log_artifact(plot_f1(result.in_distribution, report_dir / "f1_by_pattern.png"), "label/plots")
    if result.cross_source:
        _log_artifact(plot_cross_source(result.cross_source, report_dir / "cross_source.png"), "label/plots")
    for path in (report_dir / "labelers.md", report_dir / "labelers.json"):
        _log_artifact(path, "label")
    print(table)
    return result


def run(params: dict[str, Any]) -> dict[str, Any]:
    config = LabelSettings.from_params(params)
    report_dir = Path(config.report_dir)

    available: dict[str, Labeler] = {"rules": RulesLabeler(config.rules_thresholds)}
    trained = sorted({"embedding", "ensemble"} & {config.backend, *config.evaluate})
    encoder = None
    if trained:
        encoder = config.embedding.encoder()
        fitted = fit_offline(config, encoder=encoder)
        save_fitted(fitted, config)
        for path in (config.embedding_artifact, config.ensemble_artifact):
            _log_artifact(path, "label/labeler")
        available.update(embedding=fitted.embedding, ensemble=fitted.ensemble)
    gold_path = Path(config.gold or GOLD_FILE)
    write_json(
        Path(config.model_dir) / "status.json",
        {
            "fitted": trained,
            "gold": str(gold_path.name),
            "gold_md5": content_hash(gold_path),
            "backend": config.backend,
            "trained_on": fitted.data.counts if trained and fitted.data else {},
        },
    )
    to_evaluate = {name: available.get(name) or build_labeler(name, config) for name in config.evaluate}
    card = evaluate_labelers(config, to_evaluate, encoder=encoder)

    labeler = (
        available.get(config.backend)
        or to_evaluate.get(config.backend)
        or build_labeler(config.backend, config)
    )
    out_dir = Path(config.output_dir)
    staged = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(staged, ignore_errors=True)
    quarantine: list[dict[str, Any]] = []
    total = LabelStats()
    splits: dict[str, Any] = {}
    try:
        for split in config.splits:
            stats = label_file(
                Path(config.input_dir) / f"{split}.jsonl",
                staged / f"{split}.jsonl",
                labeler,
                quarantine=quarantine,
                max_bad_share=config.max_bad_share,
            )
            splits[split] = {
                "conversations": stats.conversations,
                "user_turns": stats.user_turns,
                "quarantined": stats.quarantined,
            }
            total.merge(stats)
        swap_in_dir(staged, out_dir)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
        write_jsonl(report_dir / "quarantine.jsonl", quarantine)
        for member in {id(x): x for x in (*available.values(), *to_evaluate.values(), labeler)}.values():
            member.close()

    distribution = total.as_metrics()
    write_json(report_dir / "distribution.json", distribution)
    _log_artifact(
        plot_distribution(
            distribution["by_source"], distribution["by_domain"], report_dir / "pattern_distribution.png"
        ),
        "label/plots",
    )
    return {
        "backend": config.backend,
        "fitted": trained,
        **card.metrics(),
        "splits": splits,
        "conversations": total.conversations,
        "user_turns": total.user_turns,
        "quarantined": total.quarantined,
        "no_pattern_share": distribution["no_pattern_share"],
        "share": distribution["share"],
        "by_source": distribution["by_source"],
        "by_domain": distribution["by_domain"],
    }


if __name__ == "__main__":
    main(STAGE, run, inputs)
