"""`mimesis lineage` on a real MLflow registry built the way the stages build it: two retrains with
different data give two versions with two distinct chains, each link checkable against dvc.lock."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import mlflow
import pytest
import yaml
from typer.testing import CliRunner

from mimesis_rl.agent.registry import log_agent
from mimesis_rl.cli import app
from mimesis_rl.simulator.registry import log_simulator
from mimesis_rl.tracking import content_hash, pipeline_run, stage_run
from mimesis_rl.tracking.chain import format_text, lineage, parse_model_uri
from mimesis_rl.tracking.promotion import Metric, Rule, promote

pytestmark = pytest.mark.integration

DATA = "data/raw/conversations.jsonl"
SIM = "models/simulator/rl"
AGENT = "models/agent/rl/mimesis"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def _model(folder: Path, role: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mimesis.json").write_text(json.dumps({"kind": "full", "role": role, "base": {},
                                                     "extra": {"stage": "x"}}))
    (folder / "weights.txt").write_text(text)


def _retrain(root: Path, data: str, fidelity: float, success: float) -> str:
    """ingest -> sim_rl (register + gate) -> agent_rl@mimesis (register + gate), as the stages do."""
    params = {"profile": "tiny", "seed": 1}
    with pipeline_run(params=params, root=root) as parent:
        with stage_run("ingest", {**params, "ingest": {"limit_per_source": len(data)}}):
            (root / DATA).write_text(data)
        with stage_run("sim_rl", {**params, "sim_rl": {"lr": 1e-4}}, inputs=[DATA]):
            _model(root / SIM, "simulator", "sim trained on " + data)
            log_simulator(root / SIM, data_version=f"md5:{content_hash(DATA)}")
            promote("mimesis-simulator", {"fidelity_index": Metric(fidelity)}, [Rule("fidelity_index")])
        with stage_run("agent_rl@mimesis", {**params, "agent_rl": {"steps": 2}}, inputs=[SIM]):
            _model(root / AGENT, "agent", "agent vs " + data)
            log_agent(root / AGENT, "mimesis", user=f"learned:{SIM}",
                      data_version=f"agent_sft:{content_hash(SIM)}")
            promote("mimesis-agent", {"unseen_success": Metric(success)}, [Rule("unseen_success")],
                    candidate_alias="candidate-mimesis")
        return parent.info.run_id


def _lock(root: Path) -> None:
    """dvc.lock as DVC writes it for the outputs the chain refers to (the current data version)."""
    stages = {"ingest": {"outs": [{"path": DATA, "md5": content_hash(root / DATA)}]},
              "sim_rl": {"outs": [{"path": SIM, "md5": content_hash(root / SIM)}]}}
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    root = tmp_path / "proj"
    (root / "data/raw").mkdir(parents=True)
    (root / "params.yaml").write_text("profile: tiny\n")
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "ingest": {"cmd": "x", "outs": [DATA]}, "sim_rl": {"cmd": "x", "deps": [DATA], "outs": [SIM]}}}))
    monkeypatch.chdir(root)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "params.yaml", "dvc.yaml"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "init"], cwd=root, check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                            check=True).stdout.strip()
    first = _retrain(root, '{"id": 1}\n', fidelity=60.0, success=0.5)
    old_data = content_hash(root / DATA)
    second = _retrain(root, '{"id": 1}\n{"id": 2}\n', fidelity=65.0, success=0.6)
    _lock(root)
    return {"root": root, "commit": commit, "parents": [first, second], "old_data": old_data}


def assert_champion_chain_has_every_link(registry: dict) -> None:
    root = registry["root"]
    result = lineage("models:/mimesis-agent@champion", root=root)
    agent, sim = result["chain"]
    assert (agent["registered_model"], agent["version"]) == ("mimesis-agent", "2")
    assert {"champion", "candidate-mimesis"} <= set(agent["aliases"])
    assert agent["gate"]["decision"] == "promoted" and agent["gate"]["compared_with"] == "1"
    assert agent["gate"]["metrics"]["unseen_success"]["value"] == 0.6
    # agent <- simulator: same pipeline run, the stage dvc.lock says writes the folder, md5 checked
    against = agent["trained_against"]
    assert (against["version"], against["producer_stage"]) == ("2", "sim_rl")
    assert against["matches_dvc_lock"] is True
    assert agent["run"]["inputs"][SIM]["md5"] == content_hash(root / SIM)
    assert agent["run"]["git_commit"] == registry["commit"]
    assert agent["run"]["params"]["agent_rl.steps"] == "2"
    # simulator <- data: the md5 of the input equals dvc.lock's; ingest's run is a sibling with its params
    assert (sim["registered_model"], sim["version"], sim["gate"]["decision"]) == ("mimesis-simulator", "2",
                                                                                  "promoted")
    data = sim["run"]["inputs"][DATA]
    assert data["md5"] == content_hash(root / DATA) and data["dvc_lock"] == {
        "stage": "ingest", "md5": data["md5"], "matches": True}
    assert sim["data_version"] == f"md5:{data['md5']}"
    assert sim["run"]["parent_run_id"] == registry["parents"][1]
    ingest = [r for r in sim["pipeline_runs"] if r["stage"] == "ingest"]
    assert len(ingest) == 1 and ingest[0]["params"]["ingest.limit_per_source"] == "20"
    assert ingest[0]["git_commit"] == registry["commit"]
    # every link is also checkable in MLflow itself
    client = mlflow.MlflowClient()
    assert client.get_run(sim["run"]["run_id"]).data.tags[f"mimesis.input.{DATA}"] == data["md5"]
    text = format_text(result)
    for needle in ("models:/mimesis-agent/2", "<- trained against models:/mimesis-simulator/2",
                   f"input {DATA}: md5 {data['md5']}  = dvc.lock ingest", "gate: promoted",
                   registry["commit"]):
        assert needle in text


def assert_two_retrains_two_distinct_chains(registry: dict) -> None:
    new = lineage("models:/mimesis-agent/2", root=registry["root"])["chain"]
    old = lineage("models:/mimesis-agent/1", root=registry["root"])["chain"]
    assert [link["uri"] for link in old] == ["models:/mimesis-agent/1", "models:/mimesis-simulator/1"]
    assert old[0]["trained_against"]["how"].startswith("same pipeline run")
    assert old[0]["trained_against"]["matches_dvc_lock"] is False  # the folder has been retrained since
    old_data = old[1]["run"]["inputs"][DATA]
    assert old_data["md5"] == registry["old_data"] != new[1]["run"]["inputs"][DATA]["md5"]
    assert old_data["dvc_lock"]["matches"] is False
    assert old[1]["run"]["parent_run_id"] == registry["parents"][0]
    assert old[0]["gate"]["decision"] == "promoted" and old[0]["gate"]["compared_with"] == "none"


def assert_simulator_versions_and_the_cli(registry: dict) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["lineage", "models:/mimesis-simulator@champion", "--json",
                                 "--root", str(registry["root"])])
    assert result.exit_code == 0, result.output
    chain = json.loads(result.output)["chain"]
    assert len(chain) == 1 and chain[0]["version"] == "2" and "trained_against" not in chain[0]
    text = runner.invoke(app, ["lineage", "models:/mimesis-agent@champion", "--root", str(registry["root"])])
    assert text.exit_code == 0 and "models:/mimesis-simulator/2" in text.output
    missing = runner.invoke(app, ["lineage", "models:/mimesis-agent@nobody", "--root", str(registry["root"])])
    assert missing.exit_code == 2 and "not in the registry" in missing.output
    with pytest.raises(ValueError, match="expected models:/"):
        parse_model_uri("runs:/abc/model")


def test_lineage_across_two_retrains(registry: dict) -> None:
    """One registry (building it is the slow part), three views of it."""
    assert_champion_chain_has_every_link(registry)
    assert_two_retrains_two_distinct_chains(registry)
    assert_simulator_versions_and_the_cli(registry)


def test_lineage_without_a_store_creates_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only query: no embedded store yet means a clear error, not a new empty mlflow.db."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    (tmp_path / "params.yaml").write_text("profile: tiny\n")
    result = CliRunner().invoke(app, ["lineage", "models:/mimesis-agent@champion", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "no MLflow store at" in result.output
    assert not (tmp_path / "mlflow.db").exists()
