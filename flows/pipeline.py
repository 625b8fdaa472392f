"""The `mimesis-pipeline` flow: one Prefect task per DVC stage, run in dependency order.

    python -m flows.pipeline [--profile tiny] [--until split] [--force]

DVC decides freshness (an up-to-date stage is a no-op) and keeps the cache; Prefect adds retries,
logs, the schedule and the summary. Works without a Prefect server (Prefect starts a temporary one).

Routing: stages tagged `training` (sim_sft, sim_rl, sim_panel, agent_sft, agent_rl) go to the GPU
pool when the Prefect API reports a live (ONLINE) worker on `mimesis-gpu`: each runs as a flow run of
the `mimesis-stage/stage-gpu` deployment (infra/prefect/prefect.yaml) on that pool, this flow waiting
for it. No live worker, no such deployment or pool, or no worker picking the run up within
`gpu_pickup_seconds`: the stage runs here, on the CPU pool's worker, as before. Each decision is
logged and returned in the summary (`routes`). The GPU worker must see this checkout at the same
path (one machine, or a shared filesystem): the stage's outputs land in `root` for the next stage.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task

from flows.dag import stage_order
from mimesis_rl.config import load_params, project_root, set_profile, tracking_uri
from mimesis_rl.params.check import ParamsError, check_params
from mimesis_rl.params.schema import SECTIONS
from mimesis_rl.tracking import PARENT_RUN_ENV, pipeline_run
from mimesis_rl.tracking.runs import experiment_name

GPU_POOL = "mimesis-gpu"
GPU_DEPLOYMENT = "mimesis-stage/stage-gpu"
# Stage groups (a foreach stage's expansions share its group: agent_rl@mimesis -> agent_rl) by tag.
STAGE_TAGS = {"training": ("sim_sft", "sim_rl", "sim_panel", "agent_sft", "agent_rl")}
GPU_TAGS = ("training",)


def stage_tags(stage: str) -> list[str]:
    """The tags of a stage (its task runs carry them too)."""
    group = stage.split("@", 1)[0]
    return [tag for tag, groups in STAGE_TAGS.items() if group in groups]


def live_workers(pool: str) -> list[str]:
    """Names of the workers of `pool` the Prefect API reports ONLINE; [] when the pool does not exist or
    the API cannot say."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import WorkerStatus
    from prefect.exceptions import ObjectNotFound

    try:
        with get_client(sync_client=True) as client:
            workers = client.read_workers_for_work_pool(pool)
    except ObjectNotFound:
        return []
    except Exception as exc:  # noqa: BLE001 - no API answer is no worker: the stage runs here
        get_run_logger().warning("could not read the workers of pool %s (%s): running here", pool, exc)
        return []
    return [w.name for w in workers if w.status == WorkerStatus.ONLINE]


def route(stage: str, gpu_stages: list[str] | None = None) -> tuple[str, str]:
    """('gpu' | 'local', why) for one stage. `gpu_stages` (stage names or groups) replaces the
    `training` tag's stages."""
    group = stage.split("@", 1)[0]
    if gpu_stages is None:
        wanted, what = any(tag in GPU_TAGS for tag in stage_tags(stage)), "training stage"
    else:
        wanted, what = stage in gpu_stages or group in gpu_stages, "in gpu_stages"
    if not wanted:
        return "local", f"not {'a training stage' if gpu_stages is None else 'in gpu_stages'}"
    workers = live_workers(GPU_POOL)
    if not workers:
        return "local", f"{what}, but pool {GPU_POOL} has no live worker: CPU pool"
    return "gpu", f"{what}, pool {GPU_POOL} has a live worker ({', '.join(sorted(workers))})"


def _stage_env() -> dict[str, str]:
    """The environment DVC's stage commands run in: our venv first, so `python` is the project's."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env.setdefault("DVC_NO_ANALYTICS", "1")
    return env


def dvc_command(*args: str, root: Path, echo: Callable[[str], None] | None = None) -> tuple[int, str]:
    """Run one DVC command in `root` (never two at once: the flow is sequential).

    Output is streamed line by line to `echo` as it arrives, so long stages show progress.
    """
    dvc = Path(sys.executable).parent / "dvc"
    cmd = [str(dvc) if dvc.exists() else "dvc", *args]
    lines: list[str] = []
    with subprocess.Popen(cmd, cwd=root, env=_stage_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            lines.append(line)
            if echo and line.strip():
                echo(line)
    return proc.returncode, "\n".join(lines)


@task
def run_stage(stage: str, root: str, force: bool = False) -> str:
    """`dvc repro --single-item STAGE`; the stage's own MLflow run nests under the pipeline run."""
    logger = get_run_logger()
    args = ["repro", "--single-item", stage] + (["--force"] if force else [])
    code, output = dvc_command(*args, root=Path(root), echo=lambda line: logger.info("%s | %s", stage, line))
    if code != 0:
        tail = "\n".join(output.strip().splitlines()[-25:])
        raise RuntimeError(f"stage {stage!r} failed (exit {code}):\n{tail}")
    return "skipped (up to date)" if "didn't change, skipping" in output else "ran"


@task
def run_stage_on_pool(stage: str, root: str, force: bool, parent_run_id: str | None, mlflow_uri: str,
                      pickup_seconds: float) -> str | None:
    """One stage as a flow run of the GPU deployment, waited for. None when no worker picked it up in
    `pickup_seconds` (the run is cancelled; the caller runs the stage here); raises when it failed."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.states import Cancelled

    logger = get_run_logger()
    run = run_deployment(GPU_DEPLOYMENT, timeout=0, tags=["training", f"stage:{stage}"],
                         parameters={"stage": stage, "root": root, "force": force,
                                     "parent_run_id": parent_run_id, "mlflow_uri": mlflow_uri})
    logger.info("%s | submitted to pool %s as flow run %s (%s)", stage, GPU_POOL, run.name, run.id)
    started = time.monotonic()
    with get_client(sync_client=True) as client:
        while True:
            state = client.read_flow_run(run.id).state
            if state is not None and state.is_final():
                break
            waiting = state is None or state.type.value in ("SCHEDULED", "PENDING")
            if waiting and time.monotonic() - started > pickup_seconds:
                client.set_flow_run_state(run.id, Cancelled(message="no GPU worker picked it up"), force=True)
                logger.warning("%s | no worker of %s picked flow run %s up in %.0fs: cancelled",
                               stage, GPU_POOL, run.id, pickup_seconds)
                return None
            time.sleep(2.0)
    if not state.is_completed():
        raise RuntimeError(f"stage {stage!r} failed on pool {GPU_POOL} (flow run {run.id}: {state.type.value}"
                           f" {state.message or ''})")
    return f"ran on {GPU_POOL} (flow run {run.id})"


@flow(name="mimesis-stage", log_prints=True)
def stage_flow(stage: str, root: str | None = None, force: bool = False, parent_run_id: str | None = None,
               mlflow_uri: str | None = None) -> str:
    """One DVC stage, as a flow run of its own: what the GPU pool's worker runs for the pipeline. Its
    MLflow run nests under the pipeline's parent run (`parent_run_id`) on the same tracking server."""
    if parent_run_id:
        os.environ[PARENT_RUN_ENV] = parent_run_id
    if mlflow_uri:
        os.environ["MLFLOW_TRACKING_URI"] = mlflow_uri
    return run_stage.with_options(name=stage, tags=stage_tags(stage))(
        stage, str(Path(root) if root else project_root()), force)


@task(name="params-check")
def params_check(path: str, stages: list[str]) -> str:
    """The flow's first step: every section and profile of params.yaml typed and checked
    (mimesis_rl.params.check), so a typo fails here, naming the key, before any stage runs; a section one
    of the stages reads must be there."""
    raw = check_params(path, complete=False)
    wanted = {s.split("@", 1)[0] for s in stages} & set(SECTIONS)
    missing = sorted(s for s in wanted if not isinstance(raw.get(s), dict))
    if missing:
        raise ParamsError(path, [f"{path}: missing section(s) {', '.join(missing)} "
                                 "(read by the stages to run)"])
    return f"{path}: OK (profiles: {', '.join(sorted(raw.get('profiles') or {}))})"


@flow(name="mimesis-pipeline", log_prints=True)
def pipeline(profile: str | None = None, until: str | None = None, force: bool = False,
             force_stages: list[str] | None = None, root: str | None = None,
             gpu_stages: list[str] | None = None, gpu_pickup_seconds: float = 120.0) -> dict[str, Any]:
    """Run every stage of dvc.yaml (or up to `until`) under one parent MLflow run.

    `force` reruns every stage; `force_stages` only those (e.g. `ingest` when sources outside
    the repo may have new data that DVC cannot see). `gpu_stages` (stage names or groups) replaces
    the `training`-tagged stages as those sent to the GPU pool when it has a live worker.
    """
    logger = get_run_logger()
    root_path = Path(root) if root else project_root()
    stages = stage_order(root_path / "dvc.yaml", until)
    params_check(str(root_path / "params.yaml"), stages)
    if profile:
        set_profile(profile, root_path / "params.yaml")
    params = load_params(root_path / "params.yaml")
    retries = int(params.get("pipeline", {}).get("retries", 0))
    delay = float(params.get("pipeline", {}).get("retry_delay_seconds", 5))
    status: dict[str, str] = {}
    routes: dict[str, str] = {}
    with pipeline_run(params={"profile": params["profile"], "until": until or "", "stages": ",".join(stages)},
                      tags={"mimesis.profile": params["profile"]}, root=root_path,
                      experiment=experiment_name(params)) as run:
        for stage in stages:
            forced = force or stage in (force_stages or [])
            where, why = route(stage, gpu_stages)
            result = None
            if where == "gpu":
                on_pool = run_stage_on_pool.with_options(name=f"{stage}@{GPU_POOL}", tags=stage_tags(stage),
                                                         retries=retries, retry_delay_seconds=delay)
                result = on_pool(stage, str(root_path), forced, run.info.run_id, tracking_uri(root_path),
                                 gpu_pickup_seconds)
                if result is None:
                    where, why = "local", f"{why}, but no worker picked the run up: CPU pool"
            routes[stage] = f"{where}: {why}"
            if where == "local":
                result = run_stage.with_options(name=stage, retries=retries, retry_delay_seconds=delay,
                                                tags=stage_tags(stage))(stage, str(root_path), forced)
            if stage_tags(stage) or gpu_stages:
                logger.info("route %s -> %s", stage, routes[stage])
            status[stage] = result
        parent_id = run.info.run_id
    summary = {"profile": params["profile"], "stages": status, "routes": routes,
               "mlflow_parent_run": parent_id, "tracking_uri": tracking_uri(root_path)}
    print(_where_to_look(summary, root_path))
    return summary


def _where_to_look(summary: dict[str, Any], root: Path) -> str:
    lines = [f"MIMESIS pipeline finished (profile {summary['profile']}):"]
    lines += [f"  {stage:<14} {state}" for stage, state in summary["stages"].items()]
    lines += [
        f"MLflow parent run {summary['mlflow_parent_run']} in {summary['tracking_uri']}",
        "  browse it with `make ui` (http://127.0.0.1:5000)",
        f"Stage metrics: {root / 'metrics'} (`dvc metrics show`); reports: {root / 'reports'}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="switch params.yaml to this profile first (demo | tiny)")
    parser.add_argument("--until", help="stop after this stage (runs its ancestors first)")
    parser.add_argument("--force", action="store_true", help="rerun stages even when DVC says they are fresh")
    args = parser.parse_args(argv)
    os.environ.pop(PARENT_RUN_ENV, None)
    try:
        pipeline(profile=args.profile, until=args.until, force=args.force)
    except (ParamsError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
