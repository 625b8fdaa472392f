"""A stage killed with SIGKILL leaves its MLflow run RUNNING; the next command that opens the store
(any command, from any checkout on this host) marks it KILLED with the reason."""

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

REPO = Path(__file__).resolve().parents[2]
KILLED_STAGE = textwrap.dedent("""
    import os, signal
    from mimesis_rl.tracking import stage_run
    with stage_run("doomed", {"profile": "tiny"}) as run:
        print(run.info.run_id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
""")


def _killed_run(store: str) -> str:
    env = {**os.environ, "MLFLOW_TRACKING_URI": store}
    done = subprocess.run([sys.executable, "-c", KILLED_STAGE], env=env, capture_output=True, text=True,
                          cwd=REPO)
    assert done.returncode == -9, done.stderr
    run_id = done.stdout.split()[0]
    assert MlflowClient(store).get_run(run_id).info.status == "RUNNING"  # nothing ran after the SIGKILL
    return run_id


def test_sigkilled_stage_run_is_marked_killed_when_the_store_is_next_opened(mlflow_store: str) -> None:
    run_id = _killed_run(mlflow_store)
    client = MlflowClient(mlflow_store)
    # Same dead pid, another checkout: reaped too (the pid is checked on its host, whoever started it).
    # A run with no owner tags (older runs) and a run of another host: left alone.
    experiment = client.get_run(run_id).info.experiment_id
    dead = {k: v for k, v in client.get_run(run_id).data.tags.items() if k.startswith("mimesis.")}
    other = client.create_run(experiment, tags={**dead, CHECKOUT_TAG: "/elsewhere"}).info.run_id
    remote = client.create_run(experiment, tags={**dead, "mimesis.host": "another-host"}).info.run_id
    untagged = client.create_run(experiment, tags={"mimesis.stage": "old"}).info.run_id

    with stage_run("alive", {"profile": "tiny"}) as live:  # opening the store reaps; a live run stays
        assert client.get_run(live.info.run_id).info.status == "RUNNING"
    for reaped in (run_id, other):
        killed = client.get_run(reaped)
        assert killed.info.status == "KILLED" and killed.info.end_time is not None
        assert f"process {killed.data.tags[PID_TAG]}" in killed.data.tags[SWEPT_TAG]
        assert "ended without closing this run" in killed.data.tags[SWEPT_TAG]
    assert client.get_run(run_id).data.tags[CHECKOUT_TAG] == str(REPO)
    assert client.get_run(remote).info.status == client.get_run(untagged).info.status == "RUNNING"
    assert sweep_stale_runs() == []  # idempotent
    assert mlflow.active_run() is None


def test_any_mimesis_command_in_another_checkout_reaps_it(mlflow_store: str, tmp_path: Path) -> None:
    run_id = _killed_run(mlflow_store)
    checkout = tmp_path / "other-checkout"
    checkout.mkdir()
    (checkout / "params.yaml").write_text("profile: demo\nprofiles: {demo: {}}\n")
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_store, "PYTHONPATH": os.pathsep.join(sys.path)}
    # `mimesis lineage` opens the store (then finds no such model: exit 2, one line)
    command = [sys.executable, "-c", "from mimesis_rl.cli import main; main()", "lineage",
               "models:/mimesis-agent@nothing"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=checkout)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    killed = MlflowClient(mlflow_store).get_run(run_id)
    assert killed.info.status == "KILLED"
    assert f"(checkout {checkout.resolve()})" in killed.data.tags[SWEPT_TAG]
