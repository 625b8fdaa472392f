"""The evidence run's numbers in one file: benchmarks/results/evidence.json.

    python -m benchmarks.evidence [--profile evidence] [--params params.yaml]

Trains nothing: it reads a finished run of the pipeline in this checkout (`make evidence`, or any
profile's run) — the evidence stage's reports/evidence/evidence.json (the claims with their
intervals and sizes, the issue's done-when checks, the curve points and their PNG file names), or,
when that stage has not run, the same numbers collected from sim_eval's and agent_eval's reports and
the metrics files (no PNGs then) — and adds what the README's stage table needs: the commit, the
profile, the CPU model and load average, and each stage's seconds (its MLflow run's duration, else
the `seconds` its metrics file records). Not in `make bench`'s default set: it needs a finished run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks._common import write_result
from mimesis_rl.eval.evidence import collect
from mimesis_rl.eval.evidence_settings import EvidenceSettings
from mimesis_rl.fsutil import read_json

RUN_BY_DEFAULT = False


def metrics_seconds(metrics_dir: str | Path) -> dict[str, float]:
    """`seconds` where a stage's metrics file records its own time (top level)."""
    out = {}
    folder = Path(metrics_dir)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        metrics = read_json(path)
        seconds = metrics.get("seconds") if isinstance(metrics, dict) else None
        if isinstance(seconds, int | float) and not isinstance(seconds, bool):
            out[path.stem] = float(seconds)
    return out


def mlflow_seconds(uri: str, experiment: str, profile: str | None) -> dict[str, dict[str, Any]]:
    """Per stage, the latest finished run of this profile: its wall seconds (end − start) and run id.

    A resumed run's stages may come from several pipeline runs; each stage's latest finished run is
    the one whose outputs DVC kept. An embedded store that does not exist yet is not created."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():
        return {}
    import mlflow

    client = mlflow.MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return {}
    query = "attributes.status = 'FINISHED'"
    if profile:
        query += f" and tags.`mimesis.profile` = '{profile}'"
    out: dict[str, dict[str, Any]] = {}
    for run in client.search_runs([found.experiment_id], query, order_by=["attributes.start_time DESC"],
                                  max_results=5000):
        stage = run.data.tags.get("mimesis.stage")
        if stage and stage not in out and run.info.end_time:
            out[stage] = {"seconds": round((run.info.end_time - run.info.start_time) / 1000, 1),
                          "run_id": run.info.run_id,
                          "parent_run_id": run.data.tags.get("mimesis.parent_run_id"),
                          "git_commit": run.data.tags.get("mimesis.git_commit")}
    return out


def stage_seconds(metrics_dir: str | Path, uri: str | None, experiment: str,
                  profile: str | None) -> dict[str, dict[str, Any]]:
    """Each stage's seconds: the MLflow run's duration where there is one, else its metrics file's."""
    runs = mlflow_seconds(uri, experiment, profile) if uri else {}
    table = {stage: {**row, "source": "mlflow run duration"} for stage, row in runs.items()}
    for stage, seconds in metrics_seconds(metrics_dir).items():
        table.setdefault(stage, {"seconds": seconds, "source": "metrics file"})
    return dict(sorted(table.items()))


def payload(settings: EvidenceSettings, params: dict[str, Any], uri: str | None) -> dict[str, Any]:
    """The result's body (without the machine block `write_result` adds)."""
    from mimesis_rl.tracking import git_commit

    stage_file = Path(settings.output_dir) / "evidence.json"
    evidence = read_json(stage_file)
    source = str(stage_file)
    if evidence is None:
        evidence = {**collect(settings), "charts": {}}
        source = "collected from the reports (the evidence stage has not run: no PNGs)"
    profile = evidence.get("profile") or params.get("profile")
    experiment = str((params.get("tracking") or {}).get("experiment") or "mimesis")
    stages = stage_seconds(settings.metrics, uri, experiment, profile)
    charts = evidence.get("charts") or {}
    return {
        "source": source,
        "profile": profile,
        "git_commit": evidence.get("git_commit") or git_commit(),
        "checkout_commit": git_commit(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "claims": evidence.get("claims") or [],
        "checks": evidence.get("checks") or [],
        "curves": evidence.get("curves") or {},
        "charts": {k: str(Path(settings.output_dir) / v) for k, v in charts.items()},
        "stages": stages,
        "stages_seconds_total": round(sum(r["seconds"] for r in stages.values()), 1),
        "mlflow_experiment": experiment,
    }


def main(argv: list[str]) -> None:
    from mimesis_rl.config import load_params, tracking_uri

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=None, help="params.yaml (default: the checkout's)")
    parser.add_argument("--profile", default=None, help="the run's profile (default: params.yaml's)")
    args = parser.parse_args(argv)
    params = load_params(args.params, args.profile)
    settings = EvidenceSettings.from_section(params.get("evidence"))
    candidates = (Path(settings.output_dir) / "evidence.json", settings.fidelity, settings.generalisation)
    found = [p for p in candidates if p.is_file()]
    if not found:
        sys.exit(f"benchmarks.evidence: no finished run here ({settings.output_dir}/evidence.json, "
                 f"{settings.fidelity} and {settings.generalisation} not found); run `make evidence` first")
    write_result("evidence", payload(settings, params, tracking_uri()))


if __name__ == "__main__":
    main(sys.argv[1:])
