"""What SFT and RL share: typed settings from params.yaml, precision and DeepSpeed keywords for
`TrainingArguments`, checkpoint discovery for resuming, and MLflow metrics while training.

Checkpoints live outside the stage's DVC outputs (DVC deletes outputs before a stage reruns) in a
folder named after a fingerprint of the settings and data, so an interrupted run resumes and a run
with other settings never picks up a stale checkpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import mlflow
import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from mimesis_rl.models.config import PrecisionConfig
from mimesis_rl.models.precision import device_and_dtype, trainer_precision_kwargs

log = logging.getLogger(__name__)
T = TypeVar("T")
RUN_ID_ENV = "MIMESIS_TRAIN_RUN_ID"  # the stage run that launched workers log into


def build_settings(cls: type[T], section: Mapping[str, Any] | None, where: str, **nested: Any) -> T:
    """cls(**section); unknown keys are an error naming the params.yaml section."""
    section = dict(section or {})
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(f"params.yaml `{where}`: unknown key(s) {unknown}; known: {sorted(known)}")
    return cls(**{**section, **nested})


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (settings, data hashes)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def latest_checkpoint(folder: str | Path) -> str | None:
    """The newest `checkpoint-N` under `folder` (None when there is none): what to resume from."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    return get_last_checkpoint(str(folder))


def precision_kwargs(device: str = "auto", bf16: str | bool = "auto") -> dict[str, Any]:
    """`use_cpu`/`bf16`/`fp16` for the one device switch; `bf16` true/false overrides `auto`."""
    resolved_device, dtype = device_and_dtype(PrecisionConfig(device=device))
    kwargs = trainer_precision_kwargs(resolved_device, dtype)
    if bf16 is True or bf16 == "true":
        kwargs.update(bf16=True, fp16=False)
    elif bf16 is False or bf16 == "false":
        kwargs.update(bf16=False)
    return kwargs


def resolve_bf16(params: Mapping[str, Any], section: Mapping[str, Any]) -> bool:
    """A stage's `bf16: auto` made concrete from params.yaml `models` (cpu_dtype / cuda_dtype)."""
    value = section.get("bf16", "auto")
    if value in (True, "true"):
        return True
    if value in (False, "false"):
        return False
    models = PrecisionConfig.from_params(params)
    config = PrecisionConfig(device=str(section.get("device", "auto")), cpu_dtype=models.cpu_dtype,
                             cuda_dtype=models.cuda_dtype)
    _, dtype = device_and_dtype(config)
    return dtype == torch.bfloat16


def deepspeed_path(config: str | None, root: str | Path = ".") -> str | None:
    """The DeepSpeed JSON to hand to `TrainingArguments(deepspeed=...)`, checked to exist and parse."""
    if not config:
        return None
    path = Path(config) if Path(config).is_absolute() else Path(root) / config
    if not path.is_file():
        raise FileNotFoundError(f"deepspeed config {config}: file not found")
    json.loads(path.read_text())
    return str(path)


class DropEmptyParamGroups:
    """Trainer mixin: no empty optimizer parameter groups.

    With LoRA every trainable weight decays, so HF's "no decay" group is empty. DeepSpeed's engine
    removes empty groups from the optimizer after HF built its LR scheduler on two groups, and
    torch >= 2.13 then fails in `LRScheduler.step` (`zip(..., strict=True)`). Dropping the empty
    group before the scheduler exists keeps both in agreement, with or without DeepSpeed.
    """

    def create_optimizer(self, *args: Any, **kwargs: Any) -> Any:
        optimizer = super().create_optimizer(*args, **kwargs)  # type: ignore[misc]
        optimizer.param_groups[:] = [g for g in optimizer.param_groups if g["params"]]
        return optimizer


class MlflowMetricsCallback(TrainerCallback):
    """Logs the trainer's numbers into the *current* stage run while training.

    HF's own MLflow integration starts its own run when it sees none (and logs every argument);
    this one only writes metrics, only from the main process, into the active run or the run
    named by $MIMESIS_TRAIN_RUN_ID (set for `accelerate launch` workers).
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        active = mlflow.active_run()
        self.run_id = active.info.run_id if active else os.environ.get(RUN_ID_ENV)

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not self.run_id or not logs:
            return
        metrics = {f"{self.prefix}.{k}".replace("/", "."): float(v) for k, v in logs.items()
                   if isinstance(v, int | float) and not isinstance(v, bool)}
        if metrics:
            try:
                mlflow.MlflowClient().log_batch(
                    self.run_id, metrics=[mlflow.entities.Metric(k, v, int(_now_ms()), state.global_step)
                                          for k, v in metrics.items()])
            except mlflow.exceptions.MlflowException as exc:  # never kill training over telemetry
                log.warning("could not log metrics to MLflow: %s", exc)


def _now_ms() -> float:
    import time

    return time.time() * 1000


def launch_worker(module: str, payload: Mapping[str, Any], accelerate_config: str | None,
                  root: str | Path = ".") -> dict[str, Any]:
    """Run `module` under `accelerate launch` (multi-GPU / multi-node) and return its result JSON.

    The calling stage keeps its MLflow run; workers log metrics into it through $MIMESIS_TRAIN_RUN_ID.
    """
    import subprocess
    import sys
    import tempfile

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
