"""The tiny pipeline through the scheduled retrain (flows/retrain.py) against the real local servers
`make up` starts (MLflow tracking server, Prefect server + worker), in a fresh copy of the project.

Retrain #1 (the module fixture `tiny_run`) runs every stage and promotes; the checks of the pipeline
run (every stage, lineage tags, CSD) read its runs back from the server. Then the input data change:
conversations are appended to a source file outside the repo (tests/fixtures/retrain), which only the
retrain's content hashes can see, and retrain #2 registers new versions with a new lineage chain;
retrain #3, with nothing changed, ends early and registers nothing. `mimesis lineage` on the champion
agent is checked link by link against the dvc.lock of the retrain that made it and the server's REST
API, and the champions load in an empty folder with only MLFLOW_TRACKING_URI set. The copy's
registry settings say `bundle_base: never`, so the base is named by registry URI (`mimesis-base`).

Before them, the Prefect side of `make up` (first test): both pools, the deployments of
infra/prefect/prefect.yaml and a live worker are on the server; a deployment run of the tiny profile up
to `ingest` completes through the worker, with `ingest` routed to the GPU pool (a second process worker
started on `mimesis-gpu`) and run there as a `stage-gpu` flow run; once that worker is stopped the
pipeline's training stages fall back to the CPU pool, as the retrains' routes show.

Two tiny pipeline runs (~4-5 min each on 2 cores) are the cost; everything else reads what they left
(the `make up` check and its deployment run to `ingest` add about a minute).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import mlflow
import pytest
import yaml
from typer.testing import CliRunner

from benchmarks._common import copy_checkout
from flows.dag import stage_order
from flows.pipeline import GPU_POOL, route
from flows.retrain import ARTIFACT_KEY, retrain
from mimesis_rl.cli import app
from mimesis_rl.config import set_profile
from mimesis_rl.tracking import content_hash
from mimesis_rl.tracking.runs import CHECKOUT_TAG
from mimesis_rl.tracking.servers import Servers, deployments, down, up

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "retrain"
MODELS = ("mimesis-simulator", "mimesis-agent", "mimesis-base")
REGISTERING = ("sim_sft", "sim_rl", "agent_sft", "agent_rl")  # `registry` sections (sim_panel: sim_sft's)
DATA = "data/raw/conversations.jsonl"
TRAIN = "data/processed/conversations/train.jsonl"


def _dvc(project: Path, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=project, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _rest(url: str, body: dict | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - our localhost servers
        return json.loads(response.read())


@dataclass
class Retrains:
    """What the retrains left: the copy, the servers, each retrain's result, flow run and registry."""

    project: Path
    servers: Servers
    source: Path
    results: list[dict] = field(default_factory=list)
    flow_runs: list[str] = field(default_factory=list)
    registry: list[dict[str, dict[str, dict]]] = field(default_factory=list)  # after each retrain
    locks: list[Path] = field(default_factory=list)  # a folder with each retrain's dvc.lock + dvc.yaml
    run_counts: list[int] = field(default_factory=list)

    @property
    def api(self) -> str:
        return f"{self.servers.mlflow_uri}/api/2.0/mlflow"

    def versions(self) -> dict[str, dict[str, dict]]:
        """name -> version -> the version as the MLflow server's REST API returns it."""
        out: dict[str, dict[str, dict]] = {}
        for name in MODELS:
            query = urllib.parse.urlencode({"filter": f"name='{name}'", "max_results": 1000})
            found = _rest(f"{self.api}/model-versions/search?{query}").get("model_versions", [])
            out[name] = {v["version"]: v for v in found}
        return out

    def alias(self, name: str, alias: str) -> dict:
        query = urllib.parse.urlencode({"name": name, "alias": alias})
        return _rest(f"{self.api}/registered-models/alias?{query}")["model_version"]

    def run(self, run_id: str) -> dict:
        run = _rest(f"{self.api}/runs/get?run_id={run_id}")["run"]
        run["tags"] = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
        return run

    def run_count(self) -> int:
        experiment = _rest(f"{self.api}/experiments/get-by-name?experiment_name=mimesis")["experiment"]
        ids, token = 0, None
        while True:
            body = {"experiment_ids": [experiment["experiment_id"]], "max_results": 1000,
                    **({"page_token": token} if token else {})}
            page = _rest(f"{self.api}/runs/search", body)
            ids += len(page.get("runs", []))
            token = page.get("next_page_token")
            if not token:
                return ids

    def retrain(self) -> None:
        """One retrain of the copy with the project and Prefect pointed at the servers, then snapshots."""
        from prefect.settings import PREFECT_API_URL, temporary_settings

        prefect = {PREFECT_API_URL: self.servers.prefect_api}
        with pytest.MonkeyPatch.context() as env, temporary_settings(prefect):
            env.setenv("MLFLOW_TRACKING_URI", self.servers.mlflow_uri)
            env.setenv("PREFECT_API_URL", self.servers.prefect_api)
            env.delenv("MIMESIS_PARENT_RUN_ID", raising=False)
            mlflow.set_tracking_uri(self.servers.mlflow_uri)
            state = retrain(profile="tiny", root=str(self.project), return_state=True)
            self.results.append(state.result())  # raises the failed stage's error
        self.flow_runs.append(str(state.state_details.flow_run_id))
        self.registry.append(self.versions())
        self.run_counts.append(self.run_count())
        lock = self.project.parent / f"lock-{len(self.results)}"
        lock.mkdir()
        for name in ("dvc.lock", "dvc.yaml"):
            shutil.copy2(self.project / name, lock / name)
        self.locks.append(lock)

    def new_versions(self, name: str, retrain: int) -> list[str]:
        """Versions of `name` that retrain #`retrain` (1-based) registered."""
        before = set(self.registry[retrain - 2][name]) if retrain > 1 else set()
        return sorted(set(self.registry[retrain - 1][name]) - before, key=int)


def _configure(project: Path, source: Path) -> None:
    """The copy's tiny profile: one more source (a conversations file outside the repo) and versions
    whose base is registered, not bundled; committed, so the stage runs carry a clean commit."""
    set_profile("tiny", project / "params.yaml")
    params = yaml.safe_load((project / "params.yaml").read_text())
    tiny = params["profiles"]["tiny"]
    sources = list(params["ingest"]["sources"]) + [
        {"adapter": "messages", "input": str(source), "source": "retrain-fixture"}]
    tiny.setdefault("ingest", {})["sources"] = sources
    for stage in REGISTERING:
        tiny.setdefault(stage, {}).setdefault("registry", {})["bundle_base"] = "never"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    git = ["git", "-c", "user.name=e2e", "-c", "user.email=e2e@localhost"]
    subprocess.run([*git, "commit", "-qam", "tiny: extra source, base by URI"], cwd=project, check=True)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """`make up`'s servers on free ports, stopped (process groups and all) after the module."""
    mlflow_port, prefect_port = _free_ports(2)
    run_dir = tmp_path_factory.mktemp("servers")
    started = up(Servers(run_dir, mlflow_port, prefect_port, checkout=REPO), timeout=240)
    try:
        yield started
    finally:
        down(run_dir)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, servers: Servers) -> Retrains:
    """Retrain #1 of a fresh copy: the whole tiny pipeline, the gate, the report."""
    tmp = tmp_path_factory.mktemp("e2e")
    source = tmp / "sources" / "conversations.jsonl"
    source.parent.mkdir()
    shutil.copy2(FIXTURE / "conversations.jsonl", source)
    project = copy_checkout(REPO, tmp / "project")
    _configure(project, source)
    state = Retrains(project, servers, source)
    state.retrain()
    return state


@pytest.fixture(scope="module")
def retrains(tiny_run: Retrains) -> Retrains:
    """Retrain #2 after new conversations arrived in the source file, then #3 with nothing changed."""
    with tiny_run.source.open("a") as handle:
        handle.write((FIXTURE / "new_conversations.jsonl").read_text())
    tiny_run.retrain()
    tiny_run.retrain()
    return tiny_run


def _use_server(run: Retrains) -> None:
    mlflow.set_tracking_uri(run.servers.mlflow_uri)


def _stage_runs(run: Retrains, parent: str) -> dict[str, Any]:
    """stage -> its run under the pipeline run `parent`, as the MLflow server has it."""
    _use_server(run)
    runs = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")
    return {r.data.tags["mimesis.stage"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent}


def _workers(servers: Servers, pool: str) -> list[dict]:
    return _rest(f"{servers.prefect_api}/work_pools/{pool}/workers/filter", {})


def test_make_up_pools_deployments_and_a_run_through_the_worker(
        servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> None:
    """`make up` left both pools, the deployments and a worker; a deployment run of the tiny profile (to
    `ingest`: the cheapest stage) completes through the worker, with `ingest` routed to the GPU pool
    while that has a live worker, and its outputs and MLflow run landing in the run's checkout."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api = servers.prefect_api
    pools = {p["name"]: p for p in _rest(f"{api}/work_pools/filter", {})}
    assert {"mimesis", GPU_POOL} <= set(pools) and pools[GPU_POOL]["type"] == "process"
    gpu_env = pools[GPU_POOL]["base_job_template"]["variables"]["properties"]["env"]["default"]
    assert gpu_env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # infra/prefect/gpu-pool.json
    assert {"mimesis-pipeline/pipeline-on-demand", "mimesis-retrain/retrain-weekly",
            "mimesis-stage/stage-gpu"} <= set(deployments(servers))
    assert [w["status"] for w in _workers(servers, "mimesis")] == ["ONLINE"]
    assert _workers(servers, GPU_POOL) == []

    project = copy_checkout(REPO, tmp_path_factory.mktemp("pools") / "project")
    up(replace(servers, gpu_worker=True), timeout=240)  # a one-machine "GPU box": a worker on mimesis-gpu
    try:
        assert [w["status"] for w in _workers(servers, GPU_POOL)] == ["ONLINE"]
        with temporary_settings({PREFECT_API_URL: api}):
            run = run_deployment("mimesis-pipeline/pipeline-on-demand", timeout=600, as_subflow=False,
                                 parameters={"profile": "tiny", "until": "ingest", "root": str(project),
                                             "gpu_stages": ["ingest"], "gpu_pickup_seconds": 120})
        assert run.state.type.value == "COMPLETED", run.state
    finally:
        down(servers.run_dir, only=["prefect-gpu-worker"])
    assert _workers(servers, GPU_POOL) == []  # its record is gone with it: no live worker
    # ... and the pipeline's decision says so for a training stage
    with temporary_settings({PREFECT_API_URL: api}):
        decided = route("sim_sft")
    assert decided == ("local", f"training stage, but pool {GPU_POOL} has no live worker: CPU pool")

    assert run.work_pool_name == "mimesis" and run.parameters["root"] == str(project)
    stage_runs = [r for r in _rest(f"{api}/flow_runs/filter", {}) if r["parameters"].get("stage")]
    assert len(stage_runs) == 1 and stage_runs[0]["work_pool_name"] == GPU_POOL
    assert stage_runs[0]["parameters"]["stage"] == "ingest"
    assert stage_runs[0]["state_type"] == "COMPLETED" and stage_runs[0]["parameters"]["root"] == str(project)
    logs = " ".join(line["message"] for line in _rest(f"{api}/logs/filter",
                                                      {"logs": {"flow_run_id": {"any_": [str(run.id)]}}}))
    assert f"route ingest -> gpu: in gpu_stages, pool {GPU_POOL} has a live worker" in logs
    assert (project / "data" / "raw" / "conversations.jsonl").is_file()
    assert (project / "metrics" / "ingest.json").is_file() and "ingest:" in (project / "dvc.lock").read_text()
    # ingest ran on the GPU pool's worker, its MLflow run nested under the pipeline's parent run
    found = _rest(f"{servers.mlflow_uri}/api/2.0/mlflow/runs/search", {
        "experiment_ids": [_rest(f"{servers.mlflow_uri}/api/2.0/mlflow/experiments/get-by-name"
                                 "?experiment_name=mimesis")["experiment"]["experiment_id"]]})["runs"]
    tags = {r["info"]["run_id"]: {t["key"]: t["value"] for t in r["data"]["tags"]} for r in found}
    tags = {i: t for i, t in tags.items() if t.get(CHECKOUT_TAG) == str(project.resolve())}
    parents = [i for i, t in tags.items() if t.get("mimesis.stage") == "pipeline"]
    assert len(parents) == 1
    ingest = [t for t in tags.values() if t.get("mimesis.stage") == "ingest"]
    assert len(ingest) == 1 and ingest[0]["mlflow.parentRunId"] == parents[0]


def test_every_stage_ran_and_wrote_metrics(tiny_run: Retrains) -> None:
    project, summary = tiny_run.project, tiny_run.results[0]["pipeline"]
    stages = stage_order(project / "dvc.yaml")
    assert list(summary["stages"]) == stages
    assert set(summary["stages"].values()) == {"ran"}
    assert summary["tracking_uri"] == tiny_run.servers.mlflow_uri
    assert stages[0] == "params" and (project / "params.resolved.yaml").exists()  # every stage's DVC params
    for stage in stages[1:]:
        assert json.loads((project / "metrics" / f"{stage}.json").read_text())
    assert (project / DATA).stat().st_size > 0
    assert "ingest" in _dvc(project, "metrics", "show", "--json")
    _dvc(project, "params", "diff")
    assert "up to date" in _dvc(project, "status")


def test_lineage_in_mlflow(tiny_run: Retrains) -> None:
    summary = tiny_run.results[0]["pipeline"]
    _use_server(tiny_run)
    runs = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")
    parent = next(r for r in runs if r.info.run_id == summary["mlflow_parent_run"])
    assert parent.info.status == "FINISHED"
    children = _stage_runs(tiny_run, parent.info.run_id)
    assert set(children) == set(summary["stages"]) - {"params"}  # bookkeeping: no model, data or run
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tiny_run.project, capture_output=True, text=True,
                          check=True).stdout.strip()
    for stage, run in children.items():
        assert run.info.status == "FINISHED", stage
        assert run.data.tags["mimesis.git_commit"].removesuffix("-dirty") == head
        assert run.data.tags["mimesis.profile"] == "tiny"
    validate_inputs = [k for k in children["validate"].data.tags if k.startswith("mimesis.input.")]
    assert any(k.endswith(DATA) for k in validate_inputs)
    assert children["ingest"].data.tags[f"mimesis.input.{tiny_run.source}"] == content_hash(
        FIXTURE / "conversations.jsonl")  # the external source, hashed as ingested


def test_agent_rl_with_csd_coached_and_logged(tiny_run: Retrains) -> None:
    """agent_rl@mimesis_csd ran GRPO with CSD: coach notes spliced, teacher forward, λ and leaks in MLflow;
    the plain variant (the λ = 0 ablation) logged no CSD numbers."""
    stage_runs = _stage_runs(tiny_run, tiny_run.results[0]["pipeline"]["mlflow_parent_run"])
    csd = stage_runs["agent_rl@mimesis_csd"].data.metrics
    lam = yaml.safe_load((tiny_run.project / "params.yaml").read_text())["agent_rl"]["csd"]["lam"]
    assert csd["agent_rl.csd.lambda"] == pytest.approx(lam)
    assert csd["agent_rl.csd.notes"] > 0
    assert csd["agent_rl.csd.leak_rate"] == 0.0
    assert "agent_rl.csd.reverse_kl" in csd
    assert not any(k.startswith("agent_rl.csd.") for k in stage_runs["agent_rl@mimesis"].data.metrics)


def test_agent_rl_gain_is_paired_per_dialogue(tiny_run: Retrains) -> None:
    """Before/after RL: the same greedy dialogues, their outcomes kept as an artifact, the gain paired."""
    metrics = json.loads((tiny_run.project / "metrics" / "agent_rl@assistant.json").read_text())
    outcomes = json.loads((tiny_run.project / "reports" / "agent_rl" / "assistant" / "eval_dialogues.json")
                          .read_text())
    assert set(outcomes) == {"before", "after"} and outcomes["before"].keys() == outcomes["after"].keys()
    pairs = sum(len(per) for per in outcomes["before"].values())
    for key in ("reward", "success"):
        gain = metrics["paired_gain"][key]
        assert gain["pairs"] == pairs > 0
        assert gain["ci"][0] <= gain["diff"] <= gain["ci"][1]
        assert gain["verdict"] in {"holds", "does not hold", "within noise"}


def test_first_retrain_promotes_through_the_servers(tiny_run: Retrains) -> None:
    """The gate promoted both candidates; aliases, runs, the flow run and its report read back over REST."""
    first = tiny_run.results[0]
    assert first["changed"] and "ingest (no finished run recorded)" in first["changes"]["untracked_sources"]
    routes = first["pipeline"]["routes"]  # no worker on the GPU pool: training stages fell back to the CPU
    for stage in ("sim_sft", "sim_rl", "agent_sft", "agent_rl@assistant"):
        assert routes[stage] == f"local: training stage, but pool {GPU_POOL} has no live worker: CPU pool"
    assert routes["split"] == "local: not a training stage"
    parent = first["pipeline"]["mlflow_parent_run"]
    for kind, name in (("simulator", "mimesis-simulator"), ("agent", "mimesis-agent")):
        decision = first["decision"][kind]
        assert decision["promoted"] and not decision["champion_version"], decision
        champion = tiny_run.alias(name, "champion")
        assert champion["version"] == decision["candidate_version"]
        run = tiny_run.run(champion["run_id"])
        assert run["tags"]["mlflow.parentRunId"] == parent and run["info"]["status"] == "FINISHED"
    flow_run = _rest(f"{tiny_run.servers.prefect_api}/flow_runs/{tiny_run.flow_runs[0]}")
    assert flow_run["state"]["type"] == "COMPLETED"
    assert _rest(f"{tiny_run.servers.prefect_api}/flows/{flow_run['flow_id']}")["name"] == "mimesis-retrain"
    artifacts = _rest(f"{tiny_run.servers.prefect_api}/artifacts/filter",
                      {"artifacts": {"flow_run_id": {"any_": [tiny_run.flow_runs[0]]}}})
    assert [a["key"] for a in artifacts] == [ARTIFACT_KEY]
    assert "mimesis-agent version" in artifacts[0]["data"] and "**promoted**" in artifacts[0]["data"]
    # No version bundles its base: all name the one `mimesis-base` version, whose content hash is the
    # md5 dvc.lock records for models/base.
    bases = tiny_run.registry[0]["mimesis-base"]
    assert list(bases) == ["1"]
    assert _tags(bases["1"])["mimesis.content_hash"] == _lock_md5s(tiny_run.locks[0])["models/base"]
    for name in ("mimesis-simulator", "mimesis-agent"):
        for version in tiny_run.registry[0][name].values():
            assert _tags(version)["mimesis.base_bundled"] == "false"
    assert _base_uris(tiny_run, 1) == {"models:/mimesis-base/1"}


def _tags(version: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in version.get("tags", [])}


def _base_uris(run: Retrains, retrain: int) -> set[str]:
    out = set()
    for name in ("mimesis-simulator", "mimesis-agent"):
        for version in run.new_versions(name, retrain):
            out.add(_tags(run.registry[retrain - 1][name][version])["mimesis.base_uri"])
    return out


def test_second_retrain_sees_new_data_and_registers_new_versions(retrains: Retrains) -> None:
    second = retrains.results[1]
    source = str(retrains.source)
    assert second["changed"] and list(second["changes"]["untracked_sources"]) == [source]
    assert second["changes"]["stale_stages"] == {} and second["changes"]["imports"] == {}
    old, new = second["changes"]["untracked_sources"][source].split(" -> ")
    assert old == content_hash(FIXTURE / "conversations.jsonl") and new == content_hash(retrains.source)
    assert {second["pipeline"]["stages"][s] for s in ("ingest", "sim_rl", "agent_rl@mimesis_csd")} == {"ran"}
    for kind, name in (("simulator", "mimesis-simulator"), ("agent", "mimesis-agent")):
        decision = second["decision"][kind]
        assert decision["candidate_version"] in retrains.new_versions(name, 2)
        assert decision["champion_version"] == retrains.results[0]["decision"][kind]["candidate_version"]
        expected = decision["candidate_version"] if decision["promoted"] else decision["champion_version"]
        assert retrains.alias(name, "champion")["version"] == expected  # the gate, and only it, moved it
    # The tiny base's tokenizer is trained on the ingested data: a new base, registered once, used by all
    assert retrains.new_versions("mimesis-base", 2) == ["2"]
    assert _tags(retrains.registry[1]["mimesis-base"]["2"])["mimesis.content_hash"] == _lock_md5s(
        retrains.locks[1])["models/base"]
    assert _base_uris(retrains, 2) == {"models:/mimesis-base/2"}
    flow_run = _rest(f"{retrains.servers.prefect_api}/flow_runs/{retrains.flow_runs[1]}")
    assert flow_run["state"]["type"] == "COMPLETED"


def test_third_retrain_with_nothing_changed_ends_early(retrains: Retrains) -> None:
    third = retrains.results[2]
    assert third == {"changed": False, "changes": {"imports": {}, "stale_stages": {}, "untracked_sources": {},
                                                   "changed": False}}
    assert retrains.registry[2] == retrains.registry[1]  # no new version of anything
    assert retrains.run_counts[2] == retrains.run_counts[1]  # no stage ran
    flow_run = _rest(f"{retrains.servers.prefect_api}/flow_runs/{retrains.flow_runs[2]}")
    assert flow_run["state"]["type"] == "COMPLETED"
    artifacts = _rest(f"{retrains.servers.prefect_api}/artifacts/filter",
                      {"artifacts": {"flow_run_id": {"any_": [retrains.flow_runs[2]]}}})
    assert len(artifacts) == 1 and "Nothing changed since the last retrain" in artifacts[0]["data"]


def _lock_md5s(lock_dir: Path) -> dict[str, str]:
    lock = yaml.safe_load((lock_dir / "dvc.lock").read_text())
    return {str(o["path"]).rstrip("/"): str(o["md5"]) for body in lock["stages"].values()
            for o in body.get("outs") or []}


def _check_run(run: Retrains, info: dict, lock: dict[str, str]) -> int:
    """A stage run of the chain against the server (commit, params, input md5s) and dvc.lock; returns
    how many of its inputs dvc.lock holds (each checked)."""
    served = run.run(info["run_id"])
    assert served["info"]["status"] == info["status"] == "FINISHED"
    assert served["tags"]["mimesis.git_commit"] == info["git_commit"]
    assert served["tags"].get("mimesis.stage") == info["stage"]
    params = {p["key"]: p["value"] for p in served["data"].get("params", [])}
    assert params == info["params"]
    checked = 0
    for path, entry in info["inputs"].items():
        assert served["tags"][f"mimesis.input.{path}"] == entry["md5"]
        if path in lock:
            assert entry["dvc_lock"]["md5"] == lock[path] == entry["md5"], (info["stage"], path)
            assert entry["dvc_lock"]["matches"] is True
            checked += 1
    return checked


def _chain(run: Retrains, uri: str, retrain: int) -> dict:
    """`mimesis lineage URI --json` against retrain #`retrain`'s dvc.lock; every link checked."""
    cli = CliRunner().invoke(app, ["lineage", uri, "--json", "--root", str(run.locks[retrain - 1])])
    assert cli.exit_code == 0, cli.output
    result = json.loads(cli.output)
    lock = _lock_md5s(run.locks[retrain - 1])
    agent, sim = result["chain"]
    assert (agent["registered_model"], sim["registered_model"]) == ("mimesis-agent", "mimesis-simulator")
    for link in (agent, sim):
        served = _rest(f"{run.api}/model-versions/get?name={link['registered_model']}"
                       f"&version={link['version']}")["model_version"]
        assert served["run_id"] == link["run"]["run_id"]
        assert link["version"] in run.new_versions(link["registered_model"], retrain)
        checked = _check_run(run, link["run"], lock)
        checked += sum(_check_run(run, sibling, lock) for sibling in link["pipeline_runs"])
        assert checked >= 5, link["uri"]  # data, splits, base, simulator folders: dvc.lock outputs
        assert any(r["stage"] == "ingest" for r in link["pipeline_runs"])
    against = agent["trained_against"]
    assert (against["model"], against["version"], against["producer_stage"]) == (
        "mimesis-simulator", sim["version"], "sim_rl")
    assert against["matches_dvc_lock"] is True and against["folder_md5"] == lock["models/simulator/rl"]
    return result


def _data_md5(chain: dict) -> str:
    """The ingested data's md5 in a chain: the input of the simulator pipeline's validate run."""
    validate = next(r for r in chain["chain"][1]["pipeline_runs"] if r["stage"] == "validate")
    return validate["inputs"][DATA]["md5"]


def test_lineage_of_the_champion_agent_and_two_distinct_chains(
        retrains: Retrains, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", retrains.servers.mlflow_uri)
    champion = retrains.alias("mimesis-agent", "champion")["version"]
    made_by = 2 if champion in retrains.new_versions("mimesis-agent", 2) else 1
    result = _chain(retrains, "models:/mimesis-agent@champion", made_by)
    assert result["chain"][0]["version"] == champion and "champion" in result["chain"][0]["aliases"]
    assert result["chain"][0]["gate"]["decision"] == "promoted"
    text = CliRunner().invoke(app, ["lineage", "models:/mimesis-agent@champion",
                                       "--root", str(retrains.locks[made_by - 1])])
    assert text.exit_code == 0, text.output
    sim = result["chain"][1]
    for needle in (f"models:/mimesis-agent/{champion}", f"<- trained against models:/mimesis-simulator/"
                   f"{sim['version']}", f"input {DATA}: md5 {_data_md5(result)}  = dvc.lock ingest",
                   "gate: promoted", sim["run"]["git_commit"],
                   f"base: {_tags(retrains.registry[-1]['mimesis-agent'][champion])['mimesis.base_uri']}"):
        assert needle in text.output
    assert "!= dvc.lock" not in text.output  # every link of this chain is the data version it names

    # After two retrains with different data: two agent versions, two distinct chains.
    agents = [retrains.results[i]["decision"]["agent"]["candidate_version"] for i in (0, 1)]
    chains = [_chain(retrains, f"models:/mimesis-agent/{agents[i]}", i + 1) for i in (0, 1)]
    assert chains[0]["chain"][1]["version"] != chains[1]["chain"][1]["version"]
    assert _data_md5(chains[0]) != _data_md5(chains[1])
    latest = _lock_md5s(retrains.locks[1])[DATA]
    assert _data_md5(chains[1]) == latest == content_hash(retrains.project / DATA)
    trains = [c["chain"][1]["run"]["inputs"][TRAIN]["md5"] for c in chains]
    assert trains[0] != trains[1]


def test_champions_load_in_an_empty_folder(retrains: Retrains, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Only MLFLOW_TRACKING_URI (and a download cache): simulator, agent and their base from the registry."""
    from mimesis_rl.data.schema import GoalCard
    from mimesis_rl.envs.protocols import Observation, SessionSpec
    from mimesis_rl.models.config import PrecisionSettings
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.inference.pool import ModelPool
    from mimesis_rl.models.inference.sources import resolve_source
    from mimesis_rl.rollout import ModelAgent
    from mimesis_rl.simulator.runtime import UserSimulator

    empty, cache = tmp_path / "elsewhere", tmp_path / "cache"
    empty.mkdir()
    monkeypatch.chdir(empty)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", retrains.servers.mlflow_uri)
    monkeypatch.setenv("MIMESIS_CACHE_DIR", str(cache))
    for name in ("PREFECT_API_URL", "MIMESIS_PARENT_RUN_ID"):
        monkeypatch.delenv(name, raising=False)

    sim = UserSimulator.load("models:/mimesis-simulator@champion", device="cpu")
    assert sim.manifest is not None and sim.manifest.base["uri"].startswith("models:/mimesis-base/")
    sessions = sim.start([SessionSpec(goal=GoalCard(text="Find a tent for two."), domain="shopping")])
    turn = sim.opening(sessions)[0]
    assert turn.message or (turn.ended and turn.meta["end_reason"])  # a tiny model may end the session

    source = resolve_source("models:/mimesis-agent@champion", "models/base")
    assert source.manifest is not None and source.manifest.role == "agent" and source.adapter is not None
    assert cache in source.base.parents and "mimesis-base" in str(source.base)
    assert not (source.adapter.parent / "base").exists()  # the base came by URI, not bundled
    runner = ModelPool(PrecisionSettings(device="cpu")).runner(
        source, SamplingParams(max_new_tokens=8, do_sample=False))
    agent = ModelAgent(runner, name="champion")
    messages = [{"role": "system", "content": "You sell a used bike. Get a fair price."},
                {"role": "user", "content": "hi, how much for the bike?"}]
    reply = agent.act([Observation("e2e-0", "bargain", messages, {}, 1, 2)])
    assert isinstance(reply[0], str) and len(agent.tracks["e2e-0"].turns) == 1
    assert list(empty.iterdir()) == []  # nothing needed, nothing written here
