"""A stage killed with SIGKILL leaves its MLflow run RUNNING; the next run's sweep marks it KILLED."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from mimesis_rl.tracking.runs import CHECKOUT_TAG, PID_TAG, SWEPT_TAG, stage_run, sweep_stale_runs

pytestmark = pytest.mark.integration

KILLED_STAGE = textwrap.dedent("""
    import os, signal
    from mimesis_rl.tracking import stage_run
    with stage_run("doomed", {"profile": "tiny"}) as run:
        print(run.info.run_id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
""")


def test_sigkilled_stage_run_is_marked_killed_by_the_next_sweep(mlflow_store: str, tmp_path: Path) -> None:
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_store}
    done = subprocess.run([sys.executable, "-c", KILLED_STAGE], env=env, capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == -9, done.stderr
    run_id = done.stdout.split()[0]
    client = MlflowClient(mlflow_store)
    assert client.get_run(run_id).info.status == "RUNNING"  # nothing ran after the SIGKILL

    # Same dead pid, but another checkout; and a run with no owner tags (older runs): both left alone.
    experiment = client.get_run(run_id).info.experiment_id
    dead = client.get_run(run_id).data.tags
    other = client.create_run(experiment, tags={**{k: v for k, v in dead.items() if k.startswith("mimesis.")},
                                                CHECKOUT_TAG: "/elsewhere"}).info.run_id
    untagged = client.create_run(experiment, tags={"mimesis.stage": "old"}).info.run_id

    with stage_run("alive", {"profile": "tiny"}) as live:  # a live run of this process stays
        closed = sweep_stale_runs()
        assert closed == [run_id]
        assert client.get_run(live.info.run_id).info.status == "RUNNING"
    killed = client.get_run(run_id)
    assert killed.info.status == "KILLED" and killed.info.end_time is not None
    assert f"process {killed.data.tags[PID_TAG]}" in killed.data.tags[SWEPT_TAG]
    assert killed.data.tags[CHECKOUT_TAG] == str(Path(__file__).resolve().parents[2])
    assert client.get_run(other).info.status == client.get_run(untagged).info.status == "RUNNING"
    assert sweep_stale_runs() == []  # idempotent
    assert mlflow.active_run() is None
