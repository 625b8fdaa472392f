"""One parent MLflow run per pipeline execution, one nested run per stage, lineage tags on each.

The parent run id travels to stage processes (launched by DVC) in the environment variable
MIMESIS_PARENT_RUN_ID; a stage started on its own becomes a top-level run.

Every run also records which process owns it (host, pid, the pid's start time, the checkout), so
`sweep_stale_runs` can close runs whose process died without a word (SIGKILL, OOM killer, power
loss): SIGTERM and exceptions close their run as FAILED, but nothing runs after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import RunStatus

from mimesis_rl.config import PARAMS_FILE, flatten, project_root, tracking_uri
from mimesis_rl.tracking.lineage import content_hash, git_commit

PARENT_RUN_ENV = "MIMESIS_PARENT_RUN_ID"
DEFAULT_EXPERIMENT = "mimesis"
HOST_TAG = "mimesis.host"
PID_TAG = "mimesis.pid"
PID_START_TAG = "mimesis.pid_start"
CHECKOUT_TAG = "mimesis.checkout"
SWEPT_TAG = "mimesis.swept"
DVC_EXP_ENV = "DVC_EXP_NAME"  # dvc.env.DVC_EXP_NAME
EXPERIMENT_TAG = "mimesis.dvc_experiment"

log = logging.getLogger(__name__)


def experiment_name(params: Mapping[str, Any] | None) -> str:
    """The MLflow experiment a profile records into (`tracking.experiment`): a bigger run such as the
    evidence profile keeps its runs apart from the demo's, so each profile's history compares with itself."""
    tracking = (params or {}).get("tracking") or {}
    return str(tracking.get("experiment") or DEFAULT_EXPERIMENT)


def _pid_start(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, Linux), so a reused pid is told apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22, counted after the command name


def owner_tags(root: str | Path | None = None) -> dict[str, str]:
    """Which process owns a run: host, pid, the pid's start time and the checkout it runs in."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), PID_START_TAG: _pid_start(pid),
            CHECKOUT_TAG: str(Path(root or project_root()).resolve())}


def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    now = _pid_start(pid)
    return not (started and now and now != started)  # same pid, another process: the owner is gone


def sweep_stale_runs(experiment: str = DEFAULT_EXPERIMENT, root: str | Path | None = None) -> list[str]:
    """Mark KILLED, with the reason in `mimesis.swept`, the RUNNING runs on this host whose process
    no longer exists, whichever checkout started them (a store can be shared; a pid can only be
    checked on its own host).

    Runs whenever our code opens the store (`setup`, once per process and store: every stage, the
    pipeline, `sim eval`, `lineage`, a models:/ URI), so a killed run is reaped by the next command of
    any kind, not only by the next stage of its checkout. Runs of other hosts, runs of live
    processes and runs without owner tags (older ones) are left alone. Returns the run ids closed; a
    tracking store that cannot be searched is logged, never fatal.
    """
    from mlflow.tracking import MlflowClient

    mine = owner_tags(root)
    try:
        client = MlflowClient(tracking_uri(root))
        found = client.get_experiment_by_name(experiment)
        if found is None:
            return []
        runs = client.search_runs([found.experiment_id], filter_string="attributes.status = 'RUNNING'",
                                  max_results=5000)
        closed = []
        for run in runs:
            tags = run.data.tags
            if tags.get(HOST_TAG) != mine[HOST_TAG]:  # another host's pid cannot be checked from here
                continue
            if not tags.get(PID_TAG, "").isdigit() or _alive(int(tags[PID_TAG]), tags.get(PID_START_TAG, "")):
                continue
            when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            started_in = tags.get(CHECKOUT_TAG, "?")
            client.set_tag(run.info.run_id, SWEPT_TAG,
                           f"process {tags[PID_TAG]} on {tags[HOST_TAG]} (checkout {started_in}) ended "
                           f"without closing this run (killed?); marked KILLED by pid {os.getpid()} "
                           f"(checkout {mine[CHECKOUT_TAG]}) at {when}")
            client.set_terminated(run.info.run_id, status=RunStatus.to_string(RunStatus.KILLED))
            closed.append(run.info.run_id)
    except mlflow.exceptions.MlflowException as exc:
        log.warning("could not sweep stale MLflow runs: %s", exc)
        return []
    if closed:
        log.warning("marked %d run(s) KILLED whose process died without closing them: %s",
                    len(closed), ", ".join(closed))
    return closed


_SWEPT: set[tuple[str, str]] = set()  # (store, experiment) already swept by this process


def sweep_once(experiment: str = DEFAULT_EXPERIMENT, root: str | Path | None = None) -> list[str]:
    """`sweep_stale_runs` the first time this process opens a store (later opens cost nothing)."""
    key = (tracking_uri(root), experiment)
    if key in _SWEPT:
        return []
    _SWEPT.add(key)
    return sweep_stale_runs(experiment, root)


def has_store(root: str | Path | None = None) -> bool:
    """Whether there is a store to record into: MLFLOW_TRACKING_URI is set, or we are in a checkout
    (a params.yaml above the working folder, whose mlflow.db is the store)."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return True
    return (Path(root) if root else project_root()).joinpath(PARAMS_FILE).exists()


def setup(experiment: str = DEFAULT_EXPERIMENT, root: str | Path | None = None) -> str:
    """Point MLflow at our store and experiment (artifacts in `mlartifacts/` beside the db)."""
    uri = tracking_uri(root)
    mlflow.set_tracking_uri(uri)
    if mlflow.get_experiment_by_name(experiment) is None:
        artifact_location = None
        if uri.startswith("sqlite:///"):
            db = Path(uri.removeprefix("sqlite:///"))
            artifact_location = (db.parent / "mlartifacts").resolve().as_uri()
        with contextlib.suppress(mlflow.exceptions.MlflowException):  # created concurrently
            mlflow.create_experiment(experiment, artifact_location=artifact_location)
    mlflow.set_experiment(experiment)
    sweep_once(experiment, root)  # a run whose process was killed is reaped by whoever opens the store next
    return uri


def _loggable_params(params: Mapping[str, Any]) -> dict[str, str]:
    flat = flatten(dict(params))
    return {key[:250]: str(value)[:6000] for key, value in flat.items()}


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into SystemExit so the run is closed as FAILED rather than left RUNNING."""
    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def stage_run(
    stage: str,
    params: Mapping[str, Any] | None = None,
    inputs: Sequence[str | Path] = (),
    experiment: str = DEFAULT_EXPERIMENT,
) -> Iterator[mlflow.ActiveRun]:
    """A stage's MLflow run, nested under the pipeline run when one is active.

    Tags: git commit, stage name, profile, the content hash of every input, and under `dvc exp run`
    the experiment's name (`mimesis.dvc_experiment`, to compare experiments in MLflow). Any exception
    (including SIGTERM and Ctrl-C) ends the run as FAILED before it propagates.
    """
    setup(experiment)
    parent = os.environ.get(PARENT_RUN_ENV)
    tags = {"mimesis.stage": stage, "mimesis.git_commit": git_commit(), **owner_tags()}
    if params and "profile" in params:
        tags["mimesis.profile"] = str(params["profile"])
    for path in inputs:
        tags[f"mimesis.input.{Path(path).as_posix()}"] = content_hash(path)
    if parent:
        tags["mimesis.parent_run_id"] = parent
    if os.environ.get(DVC_EXP_ENV):  # set by `dvc exp run` for every stage of the experiment
        tags[EXPERIMENT_TAG] = os.environ[DVC_EXP_ENV]
    with _sigterm_as_exit():
        if mlflow.active_run() is not None:  # same process as the parent (library use, tests)
            run = mlflow.start_run(run_name=stage, nested=True, tags=tags)
        else:
            run = mlflow.start_run(run_name=stage, parent_run_id=parent or None, tags=tags)
        try:
            if params:
                mlflow.log_params(_loggable_params(params))
            yield run
        except BaseException:
            mlflow.end_run(RunStatus.to_string(RunStatus.FAILED))
            raise
        mlflow.end_run(RunStatus.to_string(RunStatus.FINISHED))


@contextmanager
def pipeline_run(
    name: str = "pipeline",
    params: Mapping[str, Any] | None = None,
    experiment: str = DEFAULT_EXPERIMENT,
    tags: Mapping[str, str] | None = None,
    root: str | Path | None = None,
) -> Iterator[mlflow.ActiveRun]:
    """The parent run of one pipeline execution; exports its id for stage subprocesses."""
    setup(experiment, root)
    sweep_stale_runs(experiment, root)
    all_tags = {"mimesis.stage": "pipeline", "mimesis.git_commit": git_commit(), **owner_tags(root),
                **(tags or {})}
    if params and "profile" in params:
        all_tags["mimesis.profile"] = str(params["profile"])
    previous = os.environ.get(PARENT_RUN_ENV)
    with _sigterm_as_exit():
        run = mlflow.start_run(run_name=name, tags=all_tags)
        os.environ[PARENT_RUN_ENV] = run.info.run_id
        try:
            if params:
                mlflow.log_params(_loggable_params(params))
            yield run
        except BaseException:
            mlflow.end_run(RunStatus.to_string(RunStatus.FAILED))
            raise
        else:
            mlflow.end_run(RunStatus.to_string(RunStatus.FINISHED))
        finally:
            if previous is None:
                os.environ.pop(PARENT_RUN_ENV, None)
            else:
                os.environ[PARENT_RUN_ENV] = previous
