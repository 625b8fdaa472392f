"""What every TRL trainer of the project gets: no empty optimizer parameter groups, the LM head scored
only where there are labels (CPU too), metrics into the stage's MLflow run while training, and the
loss/reward series read back from the log history."""

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


_TRL_DECISION: Any = None  # TRL's own `_use_triton`, kept to put back


def score_labelled_positions_only(enabled: bool = True) -> bool:
    """Let TRL's fused LM head score only the positions that carry a label on CPU too.

    TRL's trainers compute per-token log-probs through a fused, chunked LM head (`add_fused_lm_head`).
    On Triton devices it projects only the positions whose label is not -100; everywhere else it
    projects every position, to keep tile shapes fixed for compiled backends (Neuron). Eager CPU has
    no such constraint, and in our trainers most positions carry no label (simulator SFT: 26% of the
    positions are the user turns trained on; GRPO: the multi-turn prompts), so the LM head, a third of
    a 135M model's FLOPs, did about four times the work: scoring only labelled positions measured 1.48x
    simulator SFT tokens/s (benchmarks/sim.py). A row's log-prob is the same whichever rows share its
    tile (tests/unit/test_lm_head_scoring.py). TRL takes the decision in one place,
    `trl.trainer.utils._use_triton`; this widens it to CPU, and `enabled=False` puts TRL's back.
    Returns whether the hook exists (a TRL without it keeps its own behaviour).
    """
    global _TRL_DECISION
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover - TRL is a dependency
        return False
    if not hasattr(trl_utils, "_use_triton"):
        return False
    if _TRL_DECISION is None:
        _TRL_DECISION = trl_utils._use_triton
    if not enabled:
        trl_utils._use_triton = _TRL_DECISION
        return True
    original = _TRL_DECISION

    def compact(device: Any) -> bool:
        return device.type == "cpu" or bool(original(device))

    trl_utils._use_triton = compact
    return True


class LabelledPositionsOnly:
    """Trainer mixin: `score_labelled_positions_only` before TRL builds the trainer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        score_labelled_positions_only()
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]


def with_clean_param_groups(trainer_cls: type) -> type:
    """`trainer_cls` with the project's mixins: `DropEmptyParamGroups`, `LabelledPositionsOnly`."""
    return type(f"Clean{trainer_cls.__name__}", (DropEmptyParamGroups, LabelledPositionsOnly, trainer_cls),
                {"__doc__": f"TRL's {trainer_cls.__name__}; empty optimizer parameter groups dropped, "
                            "the LM head scored only where there are labels."})


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
