"""The whole pipeline on the tiny profile in a fresh copy of the project: real DVC, MLflow, Prefect."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from benchmarks._common import copy_checkout
from flows.dag import stage_order
from flows.pipeline import pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _dvc(project: Path, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=project, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> tuple[Path, dict, str]:
    import os

    tmp = tmp_path_factory.mktemp("e2e")
    project = copy_checkout(REPO, tmp / "project")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    old = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = uri
    try:
        summary = pipeline(profile="tiny", root=str(project))
    finally:
        if old is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = old
    return project, summary, uri


def test_every_stage_ran_and_wrote_metrics(tiny_run: tuple[Path, dict, str]) -> None:
    project, summary, _ = tiny_run
    stages = stage_order(project / "dvc.yaml")
    assert list(summary["stages"]) == stages
    assert set(summary["stages"].values()) == {"ran"}
    for stage in stages:
        assert json.loads((project / "metrics" / f"{stage}.json").read_text())
    assert (project / "data/raw/conversations.jsonl").stat().st_size > 0
    assert "ingest" in _dvc(project, "metrics", "show", "--json")
    _dvc(project, "params", "diff")
    assert "up to date" in _dvc(project, "status")


def test_lineage_in_mlflow(tiny_run: tuple[Path, dict, str]) -> None:
    project, summary, uri = tiny_run
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")
    parent = next(r for r in runs if r.info.run_id == summary["mlflow_parent_run"])
    assert parent.info.status == "FINISHED"
    children = {r.data.tags["mimesis.stage"]: r for r in runs
                if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert set(children) == set(summary["stages"])
    for stage, run in children.items():
        assert run.info.status == "FINISHED", stage
        assert run.data.tags["mimesis.git_commit"] != "unknown"
        assert run.data.tags["mimesis.profile"] == "tiny"
    validate_inputs = [k for k in children["validate"].data.tags if k.startswith("mimesis.input.")]
    assert any(k.endswith("data/raw/conversations.jsonl") for k in validate_inputs)


def test_noop_rerun_skips_everything(tiny_run: tuple[Path, dict, str], prefect_harness: None) -> None:
    project, _, uri = tiny_run
    import os

    os.environ["MLFLOW_TRACKING_URI"] = uri
    again = pipeline(root=str(project))
    assert set(again["stages"].values()) == {"skipped (up to date)"}


def test_agent_rl_with_csd_coached_and_logged(tiny_run: tuple[Path, dict, str]) -> None:
    """agent_rl@mimesis_csd ran GRPO with CSD: coach notes spliced, teacher forward, λ and leaks in MLflow;
    the plain variant (the λ = 0 ablation) logged no CSD numbers."""
    import yaml

    project, summary, uri = tiny_run
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")
    stage_runs = {r.data.tags.get("mimesis.stage"): r for r in runs
                  if r.data.tags.get("mlflow.parentRunId") == summary["mlflow_parent_run"]}
    csd = stage_runs["agent_rl@mimesis_csd"].data.metrics
    lam = yaml.safe_load((project / "params.yaml").read_text())["agent_rl"]["csd"]["lam"]
    assert csd["agent_rl.csd.lambda"] == pytest.approx(lam)
    assert csd["agent_rl.csd.notes"] > 0
    assert csd["agent_rl.csd.leak_rate"] == 0.0
    assert "agent_rl.csd.reverse_kl" in csd
    assert not any(k.startswith("agent_rl.csd.") for k in stage_runs["agent_rl@mimesis"].data.metrics)
