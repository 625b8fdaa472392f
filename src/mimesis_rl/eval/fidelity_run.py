"""One fidelity comparison end to end, shared by the `sim_eval` stage and `mimesis sim eval`:
load the simulators (folders, MLflow URIs, `assistant`), read any schema-valid JSONL, evaluate,
write the markdown + PNG + JSON report, and log it all to the active MLflow run."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimesis_rl.eval.fidelity import FidelitySettings, compare, metric_key, read_heldout, summary_row
from mimesis_rl.eval.fidelity_report import render
from mimesis_rl.fsutil import write_json

log = logging.getLogger(__name__)


def load_simulators(specs: Mapping[str, str], base_model: str | Path, device: str = "auto",
                    batch_size: int = 16, dtype: str | None = None) -> dict[str, Any]:
    """name -> UserSimulator for `assistant`, a simulator folder or an MLflow URI."""
    from mimesis_rl.simulator.api import UserSimulator

    return {name: UserSimulator.load(spec, name=name, base_model=base_model, device=device,
                                     batch_size=batch_size, dtype=dtype) for name, spec in specs.items()}


def log_to_mlflow(results: Mapping[str, Mapping[str, Any]], files: list[Path]) -> None:
    """Metrics per simulator (`<name>.<metric>`), the comparison table and the report files."""
    import mlflow

    if mlflow.active_run() is None:
        return
    rows = {metric_key(name): summary_row(m) for name, m in results.items()}
    mlflow.log_metrics({f"{name}.{k}": v for name, row in rows.items() for k, v in row.items()})
    table = {"simulator": list(results)}
    for key in sorted({k for row in rows.values() for k in row}):
        table[key] = [rows[metric_key(name)].get(key) for name in results]
    mlflow.log_table(table, artifact_file="sim_eval/fidelity_table.json")
    for path in files:
        mlflow.log_artifact(str(path), artifact_path="sim_eval")


def run_eval(specs: Mapping[str, str], data: str | Path, labeler: Any, settings: FidelitySettings,
             base_model: str | Path, report_dir: str | Path, device: str = "auto",
             batch_size: int = 16, dtype: str | None = None) -> dict[str, Any]:
    """Evaluate every simulator in `specs` on `data`; returns {name: metrics} plus report paths."""
    conversations, bad = read_heldout(data)
    simulators = load_simulators(specs, base_model, device, batch_size, dtype)
    results = compare(simulators, conversations, labeler, settings)
    report_dir = Path(report_dir)
    md, png = render(results, report_dir, data=str(data), weights=settings.weights)
    write_json(report_dir / "fidelity.json", {"data": str(data), "bad_records": len(bad), "results": results})
    log_to_mlflow(results, [md, png, report_dir / "fidelity.json"])
    return {"results": results, "bad_records": len(bad), "report": str(md), "chart": str(png)}
