"""MLflow stage runs and lineage hashes against the real MLflow store and real DVC."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import yaml

from mimesis_rl.tracking import PARENT_RUN_ENV, content_hash, pipeline_run, stage_run

pytestmark = pytest.mark.integration


def test_stage_run_is_failed_when_the_stage_crashes() -> None:
    with pytest.raises(ZeroDivisionError), stage_run("boom", params={"profile": "tiny", "x": {"y": 1}}):
        1 / 0  # noqa: B018
    (run,) = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")
    assert run.info.status == "FAILED"
    assert run.data.tags["mimesis.stage"] == "boom"
    assert run.data.params["x.y"] == "1"


def test_stage_runs_nest_under_the_pipeline_run(tmp_path: Path) -> None:
    data = tmp_path / "in.txt"
    data.write_text("hello\n")
    with pipeline_run(params={"profile": "tiny"}) as parent:
        import os

        assert os.environ[PARENT_RUN_ENV] == parent.info.run_id
        with stage_run("ingest", params={"profile": "tiny"}, inputs=[data]):
            mlflow.log_metric("n", 3)
    assert PARENT_RUN_ENV not in __import__("os").environ
    runs = {r.data.tags["mimesis.stage"]: r for r in mlflow.search_runs(experiment_names=["mimesis"],
                                                                         output_format="list")}
    child = runs["ingest"]
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert child.data.tags[f"mimesis.input.{data.as_posix()}"] == content_hash(data)
    assert runs["pipeline"].info.status == child.info.status == "FINISHED"


def test_a_killed_stage_process_leaves_a_failed_run(tmp_path: Path, mlflow_store: str) -> None:
    script = tmp_path / "stage.py"
    script.write_text(
        "import os, signal\nfrom mimesis_rl.tracking import stage_run\n"
        "with stage_run('killed'):\n    os.kill(os.getpid(), signal.SIGTERM)\n")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode != 0
    (run,) = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")
    assert run.info.status == "FAILED"


def test_content_hash_equals_dvc_hashes(tmp_path: Path) -> None:
    (tmp_path / "folder" / "sub").mkdir(parents=True)
    (tmp_path / "folder" / "b.txt").write_text("b\n")
    (tmp_path / "folder" / "sub" / "a.txt").write_text("a\n")
    (tmp_path / "single.txt").write_text("x\n")
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"],
                [sys.executable, "-m", "dvc", "add", "-q", "folder", "single.txt"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    for name in ("folder", "single.txt"):
        recorded = yaml.safe_load((tmp_path / f"{name}.dvc").read_text())["outs"][0]["md5"]
        assert content_hash(tmp_path / name) == recorded


def test_stage_runs_of_a_dvc_experiment_carry_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dvc exp run` exports DVC_EXP_NAME to every stage; the runs say which experiment made them."""
    from dvc.env import DVC_EXP_NAME

    from mimesis_rl.tracking.runs import EXPERIMENT_TAG

    with stage_run("plain", params={"profile": "tiny"}):
        pass
    monkeypatch.setenv(DVC_EXP_NAME, "lr-up")
    with stage_run("sim_sft", params={"profile": "tiny"}):
        pass
    runs = {r.data.tags["mimesis.stage"]: r for r in mlflow.search_runs(experiment_names=["mimesis"],
                                                                         output_format="list")}
    assert runs["sim_sft"].data.tags[EXPERIMENT_TAG] == "lr-up"
    assert EXPERIMENT_TAG not in runs["plain"].data.tags
    (found,) = mlflow.search_runs(experiment_names=["mimesis"], output_format="list",
                                  filter_string=f"tags.`{EXPERIMENT_TAG}` = 'lr-up'")
    assert found.data.tags["mimesis.stage"] == "sim_sft"
