"""What every TRL trainer of the project gets: no empty optimizer parameter groups, metrics into the
stage's MLflow run while training, and the loss/reward series read back from the log history."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

import mlflow
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from mimesis_rl.training.launch import RUN_ID_ENV

log = logging.getLogger(__name__)


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


def with_clean_param_groups(trainer_cls: type) -> type:
    """`trainer_cls` with `DropEmptyParamGroups` mixed in (the one change every trainer needs)."""
    return type(f"Clean{trainer_cls.__name__}", (DropEmptyParamGroups, trainer_cls),
                {"__doc__": f"TRL's {trainer_cls.__name__}; empty optimizer parameter groups dropped."})


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
            now = int(time.time() * 1000)
            try:
                mlflow.MlflowClient().log_batch(
                    self.run_id, metrics=[mlflow.entities.Metric(k, v, now, state.global_step)
                                          for k, v in metrics.items()])
            except mlflow.exceptions.MlflowException as exc:  # never kill training over telemetry
                log.warning("could not log metrics to MLflow: %s", exc)


def logged(history: list[dict[str, Any]], key: str) -> list[float]:
    """Every value the trainer logged under `key`, in order (TRL logs None for a step a reward
    function did not judge: those are left out)."""
    return [float(e[key]) for e in history if e.get(key) is not None]


def first_last(history: list[dict[str, Any]], key: str, name: str) -> dict[str, float | None]:
    """`{first_<name>, last_<name>}` of a logged series (None when nothing was logged)."""
    values = logged(history, key)
    return {f"first_{name}": values[0] if values else None, f"last_{name}": values[-1] if values else None}


def logged_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics a model folder's manifest keeps (no None)."""
    return {k: v for k, v in metrics.items() if v is not None}
