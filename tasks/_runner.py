"""The one interface every stage shares: parse args, load params, open the MLflow stage run,
run the body, write `metrics/<stage>.json` atomically and log its numbers.

A stage module defines `run(params) -> metrics` and `inputs(params) -> paths` and ends with
`if __name__ == "__main__": main(STAGE, run, inputs)`.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import mlflow
import numpy as np

from mimesis_rl.config import (
    PARAMS_FILE,
    RESOLVED_FILE,
    flatten,
    load_params,
    project_root,
    resolved_stale,
)
from mimesis_rl.fsutil import write_json
from mimesis_rl.threads import set_threads
from mimesis_rl.tracking import stage_run
from mimesis_rl.tracking.runs import experiment_name, sweep_stale_runs

METRICS_DIR = Path("metrics")
StageBody = Callable[[dict[str, Any]], Mapping[str, Any]]

log = logging.getLogger("mimesis")


def seed_everything(seed: int) -> None:
    """Python's, numpy's and torch's generators; torch only where the stage has loaded it (its module
    imports it at the top), so stages without a model do not pay torch's import for a seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def stage_params(params: Mapping[str, Any], stage: str) -> dict[str, Any]:
    """What a stage's run records as its params: its own section plus the shared knobs.

    A `foreach` stage (`agent_rl@mimesis`) records its group's section (`agent_rl`).
    """
    section = stage.split("@", 1)[0]
    return {"profile": params.get("profile"), "seed": params.get("seed"), section: params.get(section, {})}


def log_numeric_metrics(metrics: Mapping[str, Any], step: int | None = None) -> None:
    numeric = {k: float(v) for k, v in flatten(dict(metrics)).items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    if numeric:
        mlflow.log_metrics(numeric, step=step)


def checked_params(stage: str, path: str | None, profile: str | None) -> dict[str, Any]:
    """The merged params, checked (mimesis_rl.params.check) before anything runs; a malformed file or a
    missing section exits 2 with the file and key path, not a traceback from deep in the stage. Run by
    DVC, a `params.resolved.yaml` (the stages' DVC params) older than params.yaml exits 2 as well."""
    from mimesis_rl.params.check import ParamsError
    from mimesis_rl.params.schema import SECTIONS

    try:
        params = load_params(path, profile)
    except (ParamsError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    root = project_root()
    if os.environ.get("DVC_STAGE") and path is None and profile is None and (root / RESOLVED_FILE).exists():
        # DVC records the resolved file's values in dvc.lock: they must be the ones this stage reads
        why = resolved_stale(root / PARAMS_FILE, root / RESOLVED_FILE, params)
        if why:
            print(f"error: {why}", file=sys.stderr)
            raise SystemExit(2)
    section = stage.split("@", 1)[0]
    if section in SECTIONS and not isinstance(params.get(section), dict):
        where = path or "params.yaml"
        print(f"error: {where}: section `{section}` is missing (the `{stage}` stage reads it)",
              file=sys.stderr)
        raise SystemExit(2)
    return params


def main(stage: str, body: StageBody, inputs: Callable[[dict[str, Any]], Sequence[str]] = lambda p: (),
         argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog=f"python -m tasks.{stage}", description=f"Run the `{stage}` stage.")
    parser.add_argument("--params", default=None, help="params.yaml to read (default: the project's)")
    parser.add_argument("--profile", default=None, help="override the profile named in params.yaml")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    params = checked_params(stage, args.params, args.profile)
    seed_everything(int(params.get("seed", 0)))
    set_threads()  # explicit: torch's own default is not what this container may use
    existing_inputs = [p for p in inputs(params) if Path(p).exists()]
    experiment = experiment_name(params)
    sweep_stale_runs(experiment)  # runs on this host whose process was killed (SIGKILL) stay RUNNING
    with stage_run(stage, stage_params(params, stage), inputs=existing_inputs, experiment=experiment):
        metrics = dict(body(params))
        write_json(METRICS_DIR / f"{stage}.json", metrics)
        log_numeric_metrics(metrics)
    log.info("%s done: %s", stage, {k: v for k, v in metrics.items() if not isinstance(v, dict)})
    return metrics
