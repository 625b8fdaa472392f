"""The Prefect pipeline over a small real DVC project: order, --until, retries, FAILED runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import mlflow
import pytest
import yaml

from flows.dag import stage_order
from flows.pipeline import pipeline

pytestmark = pytest.mark.integration

STAGE_SCRIPT = textwrap.dedent('''
    """A stage that uses the project's real stage runner (MLflow run, metrics file)."""
    import sys
    from pathlib import Path
    from tasks._runner import main

    NAME, SRC, DST = sys.argv[1], sys.argv[2], sys.argv[3]

    def run(params):
        if Path("fail_" + NAME).exists():
            raise RuntimeError("asked to fail")
        text = Path(SRC).read_text() if SRC != "-" else "seed\\n"
        Path(DST).write_text(text + NAME + "\\n")
        return {"lines": len((text + NAME).splitlines())}

    main(NAME, run, lambda p: [SRC] if SRC != "-" else [], argv=[])
''')


def _stage(name: str, src: str, dst: str) -> dict:
    deps = ["stage.py"] + ([src] if src != "-" else [])
    return {"cmd": f"python stage.py {name} {src} {dst}", "deps": deps, "outs": [dst],
            "metrics": [{f"metrics/{name}.json": {"cache": False}}]}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "stage.py").write_text(STAGE_SCRIPT)
    (root / "tasks").symlink_to(Path(__file__).resolve().parents[2] / "tasks")
    (root / "params.yaml").write_text(yaml.safe_dump({
        "profile": "tiny", "seed": 1, "pipeline": {"retries": 0, "retry_delay_seconds": 0},
        "profiles": {"tiny": {}, "demo": {}}}))
    # declared out of order on purpose: the flow must follow the data, not the file
    stages = {"c": _stage("c", "b.txt", "c.txt"), "a": _stage("a", "-", "a.txt"),
              "b": _stage("b", "a.txt", "b.txt")}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=root, check=True)
    return root


def _runs(stage: str | None = None) -> list:
    runs = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")
    return [r for r in runs if stage is None or r.data.tags.get("mimesis.stage") == stage]


def test_stage_order_follows_data_not_file(project: Path) -> None:
    assert stage_order(project / "dvc.yaml") == ["a", "b", "c"]
    assert stage_order(project / "dvc.yaml", until="b") == ["a", "b"]
    with pytest.raises(ValueError, match="unknown stage"):
        stage_order(project / "dvc.yaml", until="nope")


def test_pipeline_runs_stages_nested_under_one_parent(project: Path, prefect_harness: None) -> None:
    summary = pipeline(root=str(project))
    assert summary["stages"] == {"a": "ran", "b": "ran", "c": "ran"}
    assert (project / "c.txt").read_text().split() == ["seed", "a", "b", "c"]
    parent = _runs("pipeline")[0]
    children = [r for r in _runs() if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["mimesis.stage"] for r in children) == ["a", "b", "c"]
    for child in children:
        assert child.info.status == "FINISHED"
        assert child.data.tags["mimesis.git_commit"]
    b_run = next(r for r in children if r.data.tags["mimesis.stage"] == "b")
    assert "mimesis.input.a.txt" in b_run.data.tags  # lineage: the hash of its input

    again = pipeline(root=str(project))  # DVC says everything is fresh
    assert set(again["stages"].values()) == {"skipped (up to date)"}


def test_until_and_failure_marks_run_failed(project: Path, prefect_harness: None) -> None:
    summary = pipeline(root=str(project), until="a")
    assert list(summary["stages"]) == ["a"]
    (project / "fail_b").write_text("")
    with pytest.raises(RuntimeError, match="stage 'b' failed"):
        pipeline(root=str(project))
    failed = _runs("b")
    assert failed and all(r.info.status == "FAILED" for r in failed)
    assert _runs("pipeline")[0].info.status == "FAILED"


def test_foreach_stages_expand_in_dependency_order(project: Path) -> None:
    """A `foreach` stage (the agent matrix uses one) is one node per item, named as DVC names it."""
    spec = yaml.safe_load((project / "dvc.yaml").read_text())
    spec["stages"]["d"] = {"foreach": ["x", "y"], "do": {
        "cmd": "python stage.py d_${item} c.txt d_${item}.txt", "deps": ["stage.py", "c.txt"],
        "outs": ["d_${item}.txt"]}}
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert stage_order(project / "dvc.yaml") == ["a", "b", "c", "d@x", "d@y"]
    assert stage_order(project / "dvc.yaml", until="d") == ["a", "b", "c", "d@x", "d@y"]
    assert stage_order(project / "dvc.yaml", until="d@y") == ["a", "b", "c", "d@y"]


def test_a_gpu_stage_nobody_picks_up_runs_here(project: Path, prefect_harness: None) -> None:
    """The GPU pool looks alive (a worker's heartbeat) but no worker takes the stage's flow run: after
    `gpu_pickup_seconds` the run is cancelled and the stage runs in the pipeline, as on the CPU pool."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate

    from flows.pipeline import GPU_POOL, stage_flow

    with get_client(sync_client=True) as client:
        client.create_work_pool(WorkPoolCreate(name=GPU_POOL, type="process"))
        client.send_worker_heartbeat(GPU_POOL, "quiet-gpu-worker")
    stage_flow.to_deployment(name="stage-gpu", work_pool_name=GPU_POOL).apply()

    summary = pipeline(root=str(project), until="b", gpu_stages=["b"], gpu_pickup_seconds=3)
    assert summary["stages"] == {"a": "ran", "b": "ran"}
    assert summary["routes"]["a"] == "local: not in gpu_stages"
    assert summary["routes"]["b"] == (f"local: in gpu_stages, pool {GPU_POOL} has a live worker "
                                      "(quiet-gpu-worker), but no worker picked the run up: CPU pool")
    with get_client(sync_client=True) as client:
        runs = [r for r in client.read_flow_runs() if r.parameters.get("stage") == "b"]
    assert len(runs) == 1 and runs[0].state.is_cancelled() and runs[0].work_pool_name == GPU_POOL


def test_the_flow_checks_params_first(project: Path, prefect_harness: None,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed params.yaml stops the flow at its first step, naming the key; no stage runs."""
    from flows.pipeline import main
    from mimesis_rl.params.check import ParamsError

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["pipeline"]["retries"] = "twice"
    params["split"] = {"fractions": {"train": 0.8, "val": 0.1, "tset": 0.1}}
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError) as info:
        pipeline(root=str(project))
    assert "pipeline.retries: Input should be a valid integer" in str(info.value)
    assert "split.fractions.tset: unknown key" in str(info.value)
    assert not (project / "a.txt").exists() and _runs() == []
    monkeypatch.chdir(project)
    assert main([]) == 2  # the command line: one message, exit 2
