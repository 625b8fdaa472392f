"""Stage `report`: one page with the run's evidence, `reports/mimesis_report.{html,md}`.

    python -m tasks.report [--profile tiny]

Reads what `validate`, `label`, `sim_eval`, `agent_eval` and `promote` wrote, and the learning curves
training stages recorded in their metrics files (paths in params.yaml `report`); a missing input
makes its section say "not produced by this run", never an error. The files go to the stage's MLflow
run and to the pipeline's parent run (tag `mimesis.parent_run_id`), where a reader of the run finds
them first.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

from mimesis_rl.report.render import write
from mimesis_rl.report.settings import ReportSettings
from tasks._runner import main

STAGE = "report"
log = logging.getLogger("mimesis")


def inputs(params: dict[str, Any]) -> list[str]:
    from mimesis_rl.eval.evidence import curve_files

    settings = ReportSettings.from_section(params.get(STAGE))
    return [*settings.inputs(), *curve_files(settings.metrics)]


def run_info(params: dict[str, Any]) -> dict[str, Any]:
    """Profile, commit, the pipeline's parent run id and when: the page's header line."""
    import mlflow

    from mimesis_rl.tracking import git_commit

    info: dict[str, Any] = {
        "profile": params.get("profile"),
        "git_commit": git_commit(),
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    active = mlflow.active_run()
    if active is not None:
        info["stage_run_id"] = active.info.run_id
        tags = mlflow.get_run(active.info.run_id).data.tags
        info["parent_run_id"] = tags.get("mimesis.parent_run_id") or tags.get("mlflow.parentRunId")
    return info


def log_files(paths: list[Path], parent_id: str | None, artifact_path: str = "report") -> list[str]:
    """The files to the stage run and to the pipeline's parent run; returns where they went."""
    import mlflow

    where = []
    if mlflow.active_run() is not None:
        for path in paths:
            mlflow.log_artifact(str(path), artifact_path=artifact_path)
        where.append(mlflow.active_run().info.run_id)
    if parent_id:
        client = mlflow.MlflowClient()
        for path in paths:
            client.log_artifact(parent_id, str(path), artifact_path=artifact_path)
        where.append(parent_id)
    return where


def run(params: dict[str, Any]) -> dict[str, Any]:
    settings = ReportSettings.from_section(params.get(STAGE))
    info = run_info(params)
    summary = write(settings, info)
    summary.pop("context")
    paths = [settings.html_path, settings.md_path]
    logged = log_files(paths, info.get("parent_run_id"))
    if not info.get("parent_run_id"):
        log.info("report: no pipeline parent run (stage run on its own); logged to the stage run only")
    log.info(
        "report: %s (%d of %d sections produced; missing: %s)",
        settings.html_path,
        summary["sections_produced"],
        len(summary["sections"]),
        summary["sections_missing"] or "none",
    )
    return {**summary, "logged_to_parent": int(bool(info.get("parent_run_id")) and len(logged) > 0)}


if __name__ == "__main__":
    main(STAGE, run, inputs)
