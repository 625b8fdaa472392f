"""One launcher for every trainer: in this process, or under `accelerate launch` (multi-GPU, multi-node,
DeepSpeed) with the config named in params.yaml. The stage command stays the same either way.

    launcher: accelerate
    accelerate_config: infra/accelerate/multi_gpu_zero2.yaml

runs `accelerate launch --config_file <it> -m <stage module> PAYLOAD.json RESULT.json`; each stage
module ends with `worker_main(<module>, run_payload)`. Workers log into the calling stage's MLflow
run through $MIMESIS_TRAIN_RUN_ID.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import mlflow

log = logging.getLogger(__name__)
RUN_ID_ENV = "MIMESIS_TRAIN_RUN_ID"  # the stage run that launched workers log into
LAUNCHERS = ("python", "accelerate")


class Launchable(Protocol):
    """What the launcher reads of a stage's settings (`training.config.TrainingSettings` has it)."""

    launcher: str
    accelerate_config: str | None

    def to_json(self) -> dict[str, Any]: ...


def launch_worker(module: str, payload: Mapping[str, Any], accelerate_config: str | None,
                  root: str | Path = ".") -> dict[str, Any]:
    """Run `module` under `accelerate launch` (multi-GPU / multi-node) and return its result JSON.

    The calling stage keeps its MLflow run; workers log metrics into it through $MIMESIS_TRAIN_RUN_ID.
    """
    if not accelerate_config:
        raise ValueError("launcher `accelerate` needs accelerate_config (a file under infra/accelerate)")
    config = Path(root) / accelerate_config  # an absolute path stays absolute
    if not config.is_file():
        raise FileNotFoundError(f"accelerate config {accelerate_config}: file not found")
    env = dict(os.environ)
    active = mlflow.active_run()
    if active is not None:
        env[RUN_ID_ENV] = active.info.run_id
    with tempfile.TemporaryDirectory(prefix="mimesis-launch-") as tmp:
        payload_path, result_path = Path(tmp) / "payload.json", Path(tmp) / "result.json"
        payload_path.write_text(json.dumps(payload, default=str))
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config), "-m", module,
               str(payload_path), str(result_path)]
        log.info("launching: %s", " ".join(cmd))
        subprocess.run(cmd, check=True, env=env, cwd=root)
        return json.loads(result_path.read_text())


def run_stage(module: str, train_fn: Callable[..., dict[str, Any]], settings: Launchable,
              payload: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Train in this process (`train_fn(settings, **kwargs)`), or under `accelerate launch` when the
    settings say so (`module`'s `run_payload` gets `{"settings": ..., **payload}`)."""
    if settings.launcher == "accelerate":
        return launch_worker(module, {"settings": settings.to_json(), **payload}, settings.accelerate_config)
    return train_fn(settings, **kwargs)


def worker_main(module: str, run: Callable[[dict[str, Any]], dict[str, Any]],
                argv: list[str] | None = None) -> None:
    """`accelerate launch -m <module> PAYLOAD.json [RESULT.json]`: `run(payload)` -> metrics JSON."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit(f"usage: python -m {module} PAYLOAD.json [RESULT.json]")
    metrics = run(json.loads(Path(args[0]).read_text()))
    if len(args) > 1:
        from mimesis_rl.fsutil import write_json

        write_json(args[1], metrics)
