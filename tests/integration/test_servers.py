"""`mimesis infra up/down`: real MLflow and Prefect servers + a process worker as child processes.
A run, a registered version and an alias go in through the MLflow server and come back through its
REST API; a tiny flow runs against the Prefect server and is read back; `down` leaves no process."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import mlflow
import pytest
from prefect import flow
from prefect.settings import PREFECT_API_URL, temporary_settings

from mimesis_rl.tracking.servers import (
    Servers,
    _post_json,
    deployments,
    down,
    group_members,
    port_free,
    status,
    up,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MLFLOW_PORT, PREFECT_PORT = 15077, 14277  # not the defaults, so a developer's `make up` is left alone


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - localhost
        return json.loads(response.read())


@flow(name="mimesis-server-check")
def tiny_flow(x: int) -> int:
    return x * 2


def test_up_use_read_back_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not (port_free(MLFLOW_PORT) and port_free(PREFECT_PORT)):
        pytest.skip(f"port {MLFLOW_PORT} or {PREFECT_PORT} is taken")
    servers = Servers(tmp_path / "servers", MLFLOW_PORT, PREFECT_PORT, pool="mimesis-test")
    up(servers, timeout=240)
    pids = {name: s["pid"] for name, s in status(servers.run_dir).items()}
    try:
        assert all(s["running"] for s in status(servers.run_dir).values())
        pools = {p["name"] for p in _post_json(f"{servers.prefect_api}/work_pools/filter", {})}
        assert {"mimesis-test", "mimesis", "mimesis-gpu"} <= pools  # the worker's, and prefect.yaml's
        assert "mimesis-stage/stage-gpu" in deployments(servers)
        assert up(servers) == servers  # idempotent: running servers are kept, not doubled
        assert {n: s["pid"] for n, s in status(servers.run_dir).items()} == pids

        monkeypatch.setenv("MLFLOW_TRACKING_URI", servers.mlflow_uri)
        mlflow.set_tracking_uri(servers.mlflow_uri)
        mlflow.set_experiment("server-check")
        folder = tmp_path / "model"
        folder.mkdir()
        (folder / "weights.txt").write_text("w")
        with mlflow.start_run() as run:
            mlflow.log_metric("score", 0.75)
            mlflow.log_artifacts(str(folder), artifact_path="model")  # proxied to the server's artifact root
        client = mlflow.MlflowClient()
        client.create_registered_model("server-check-model")
        version = client.create_model_version("server-check-model", source=f"{run.info.artifact_uri}/model",
                                              run_id=run.info.run_id)
        client.set_registered_model_alias("server-check-model", "champion", version.version)

        api = f"{servers.mlflow_uri}/api/2.0/mlflow"
        got = _get(f"{api}/runs/get?run_id={run.info.run_id}")["run"]
        assert got["data"]["metrics"][0]["key"] == "score" and got["data"]["metrics"][0]["value"] == 0.75
        alias = _get(f"{api}/registered-models/alias?name=server-check-model&alias=champion")
        assert alias["model_version"]["version"] == str(version.version)
        assert list((servers.run_dir / "mlartifacts").rglob("weights.txt"))  # the local artifact root

        with temporary_settings({PREFECT_API_URL: servers.prefect_api}):
            state = tiny_flow(21, return_state=True)
            assert state.result() == 42
            flow_run_id = state.state_details.flow_run_id
        read = _get(f"{servers.prefect_api}/flow_runs/{flow_run_id}")
        assert read["state"]["type"] == "COMPLETED" and read["parameters"] == {"x": 21}
    finally:
        stopped = down(servers.run_dir)
    assert sorted(stopped) == sorted(pids)
    # no stray process in any group
    assert {name: group_members(pid) for name, pid in pids.items()} == {name: [] for name in pids}
    assert port_free(MLFLOW_PORT) and port_free(PREFECT_PORT)
    assert not list(servers.run_dir.glob("*.pid"))
