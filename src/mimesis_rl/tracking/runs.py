"""One parent MLflow run per pipeline execution, one nested run per stage, lineage tags on each.

The parent run id travels to stage processes (launched by DVC) in the environment variable
MIMESIS_PARENT_RUN_ID; a stage started on its own becomes a top-level run.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import RunStatus

from mimesis_rl.config import flatten, project_root
from mimesis_rl.tracking.lineage import content_hash, git_commit

PARENT_RUN_ENV = "MIMESIS_PARENT_RUN_ID"
DEFAULT_EXPERIMENT = "mimesis"


def tracking_uri(root: str | Path | None = None) -> str:
    """MLFLOW_TRACKING_URI if set, else the embedded `sqlite:///<root>/mlflow.db`."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    root = Path(root) if root else project_root()
    return f"sqlite:///{(root / 'mlflow.db').resolve()}"


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

    Tags: git commit, stage name, profile, the content hash of every input. Any exception
    (including SIGTERM and Ctrl-C) ends the run as FAILED before it propagates.
    """
    setup(experiment)
    parent = os.environ.get(PARENT_RUN_ENV)
    tags = {"mimesis.stage": stage, "mimesis.git_commit": git_commit()}
    if params and "profile" in params:
        tags["mimesis.profile"] = str(params["profile"])
    for path in inputs:
        tags[f"mimesis.input.{Path(path).as_posix()}"] = content_hash(path)
    if parent:
        tags["mimesis.parent_run_id"] = parent
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
    all_tags = {"mimesis.stage": "pipeline", "mimesis.git_commit": git_commit(), **(tags or {})}
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
