"""The retrain flow over a small real DVC project whose stages use the real stage runner, register
real MLflow versions and run the real promotion gate: the first retrain promotes, a second with
nothing changed ends early and registers nothing, a worse candidate leaves the champion where it
was, a failed stage fails the flow run with the stage's error; `dvc update` sees a changed import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import mlflow
import pytest
import yaml
from prefect.artifacts import Artifact

from flows.retrain import ARTIFACT_KEY, retrain, update_imports

pytestmark = pytest.mark.integration

MODEL = "toy-model"
STAGE_SCRIPT = textwrap.dedent('''
    """ingest (an external source) -> train (registers a version) -> promote (the real gate)."""
    import json
    import sys
    from pathlib import Path

    import mlflow

    from tasks._runner import main

    NAME = sys.argv[1]

    def ingest(params):
        text = Path(params["ingest"]["sources"][0]["input"]).read_text()
        Path("data.txt").write_text(text)
        return {"lines": len(text.splitlines())}

    def train(params):
        if Path("fail_train").exists():
            raise RuntimeError("asked to fail: train")
        quality = float(Path("data.txt").read_text().split()[-1])  # the data says how good it makes us
        Path("model").mkdir(exist_ok=True)
        Path("model/weights.txt").write_text(str(quality))
        mlflow.log_artifacts("model", "model")
        client = mlflow.MlflowClient()
        try:
            client.get_registered_model("toy-model")
        except mlflow.exceptions.MlflowException:
            client.create_registered_model("toy-model")
        run_id = mlflow.active_run().info.run_id
        v = client.create_model_version("toy-model", source=mlflow.get_artifact_uri("model"), run_id=run_id)
        client.set_registered_model_alias("toy-model", "candidate", v.version)
        Path("quality.json").write_text(json.dumps({"quality": quality}))
        return {"quality": quality}

    def promote(params):
        from mimesis_rl.tracking.promotion import Metric, Rule, promote as gate
        quality = json.loads(Path("quality.json").read_text())["quality"]
        decision = gate("toy-model", {"quality": Metric(quality)}, [Rule("quality")])
        Path("reports/promote").mkdir(parents=True, exist_ok=True)
        Path("reports/promote/decision.json").write_text(json.dumps({"simulator": decision.as_dict()}))
        return {"promoted": int(decision.promoted)}

    inputs = (lambda p: [p["ingest"]["sources"][0]["input"]]) if NAME == "ingest" else (lambda p: [])
    main(NAME, globals()[NAME], inputs, argv=[])
''')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "stage.py").write_text(STAGE_SCRIPT)
    (root / "tasks").symlink_to(Path(__file__).resolve().parents[2] / "tasks")
    source = tmp_path / "outside" / "source.txt"  # a source outside the repo: DVC cannot see it
    source.parent.mkdir()
    source.write_text("quality 1.0\n")
    (root / "params.yaml").write_text(yaml.safe_dump({
        # params.yaml is checked before a stage runs: the toy stages use the real sections' shapes
        "profile": "tiny", "seed": 1, "ingest": {"sources": [{"adapter": "messages", "input": str(source)}]},
        "promote": {},
        "pipeline": {"retries": 0, "retry_delay_seconds": 0,
                     "retrain": {"source_stages": ["ingest"], "decision": "reports/promote/decision.json"}},
        "profiles": {"tiny": {}, "demo": {}}}))
    stages = {
        "ingest": {"cmd": "python stage.py ingest", "deps": ["stage.py"], "params": ["ingest"],
                   "outs": ["data.txt"]},
        "train": {"cmd": "python stage.py train", "deps": ["stage.py", "data.txt"],
                  "outs": ["model", "quality.json"]},
        "promote": {"cmd": "python stage.py promote", "deps": ["stage.py", "quality.json"],
                    "outs": [{"reports/promote/decision.json": {"cache": False}}]},
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=root, check=True)
    return root


def _versions() -> list[str]:
    return sorted(str(v.version) for v in mlflow.MlflowClient().search_model_versions(f"name = '{MODEL}'"))


def _champion() -> str:
    return str(mlflow.MlflowClient().get_model_version_by_alias(MODEL, "champion").version)


@pytest.mark.slow
def test_retrain_promotes_skips_refuses_and_fails(project: Path, prefect_harness: None) -> None:
    source = project.parent / "outside" / "source.txt"
    first = retrain(root=str(project))
    assert first["changed"] and first["decision"]["simulator"]["promoted"]
    assert "ingest (no finished run recorded)" in first["changes"]["untracked_sources"]
    assert _versions() == ["1"] and _champion() == "1"
    report = Artifact.get(ARTIFACT_KEY)
    assert report is not None and "toy-model version 1 — **promoted**" in report.data

    runs_before = len(mlflow.search_runs(experiment_names=["mimesis"], output_format="list"))
    quiet = retrain(root=str(project))  # nothing changed: ends early, no stage runs, nothing registered
    assert quiet == {"changed": False, "changes": {"imports": {}, "stale_stages": {}, "untracked_sources": {},
                                                   "changed": False}}
    assert _versions() == ["1"]
    assert len(mlflow.search_runs(experiment_names=["mimesis"], output_format="list")) == runs_before
    assert "Nothing changed" in Artifact.get(ARTIFACT_KEY).data

    source.write_text("quality 0.5\n")  # new data, and a worse model from it
    worse = retrain(root=str(project))
    assert list(worse["changes"]["untracked_sources"]) == [str(source)]
    assert worse["pipeline"]["stages"] == {"ingest": "ran", "train": "ran", "promote": "ran"}
    gate = worse["decision"]["simulator"]
    assert (gate["candidate_version"], gate["promoted"], gate["champion_version"]) == ("2", False, "1")
    assert _versions() == ["1", "2"] and _champion() == "1"  # champion untouched
    text = Artifact.get(ARTIFACT_KEY).data
    assert "**not promoted** (champion unchanged)" in text and "| quality | 0.5 | 1 |" in text
    assert f"source `{source}`" in text

    source.write_text("quality 2.0\n")
    (project / "fail_train").write_text("")
    state = retrain(root=str(project), return_state=True)
    assert state.is_failed()
    with pytest.raises(RuntimeError, match="asked to fail: train"):
        state.result()
    assert _versions() == ["1", "2"] and _champion() == "1"


def test_update_imports_sees_a_changed_import(project: Path) -> None:
    external = project.parent / "outside" / "lake.csv"
    external.write_text("a,b\n1,2\n")
    subprocess.run([sys.executable, "-m", "dvc", "import-url", str(external), "lake.csv", "-q"], cwd=project,
                   check=True)
    assert update_imports(project) == {}
    external.write_text("a,b\n1,2\n3,4\n")
    changed = update_imports(project)
    assert list(changed) == ["lake.csv.dvc"] and "->" in changed["lake.csv.dvc"]
    assert (project / "lake.csv").read_text() == "a,b\n1,2\n3,4\n"  # updated, so the next repro sees it


@pytest.mark.slow
def test_retrain_against_real_servers(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same flow with `make up`'s servers: the runs, the champion alias and the flow run are read
    back through the MLflow and Prefect REST APIs; a second retrain with nothing changed registers nothing."""
    import json
    import socket
    import urllib.request

    from prefect.settings import PREFECT_API_URL, temporary_settings

    from mimesis_rl.tracking.servers import Servers, down, up

    socks = [socket.socket() for _ in range(2)]
    for sock in socks:  # two free ports, held together so they differ
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in socks]
    for sock in socks:
        sock.close()
    servers = Servers(tmp_path / "servers", *ports, pool="mimesis-retrain-test")

    def get(url: str, body: dict | None = None) -> dict | list:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - localhost
            return json.loads(response.read())

    up(servers, timeout=240)
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", servers.mlflow_uri)
        monkeypatch.setenv("PREFECT_API_URL", servers.prefect_api)
        mlflow.set_tracking_uri(servers.mlflow_uri)
        with temporary_settings({PREFECT_API_URL: servers.prefect_api}):
            first = retrain(root=str(project), return_state=True)
            quiet = retrain(root=str(project), return_state=True)
        assert first.result()["decision"]["simulator"]["promoted"] and not quiet.result()["changed"]
        api = f"{servers.mlflow_uri}/api/2.0/mlflow"
        champion = get(f"{api}/registered-models/alias?name={MODEL}&alias=champion")["model_version"]
        assert champion["version"] == "1"
        versions = get(f"{api}/model-versions/search?filter=name%3D%27{MODEL}%27")["model_versions"]
        assert len(versions) == 1  # the early exit registered nothing
        stage_run = get(f"{api}/runs/get?run_id={champion['run_id']}")["run"]
        tags = {t["key"]: t["value"] for t in stage_run["data"]["tags"]}
        assert tags["mimesis.stage"] == "train" and tags["mlflow.parentRunId"]
        for state in (first, quiet):
            read = get(f"{servers.prefect_api}/flow_runs/{state.state_details.flow_run_id}")
            assert read["state"]["type"] == "COMPLETED"
        assert {a["key"] for a in get(f"{servers.prefect_api}/artifacts/filter", {})} == {ARTIFACT_KEY}
    finally:
        down(servers.run_dir)
