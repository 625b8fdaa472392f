"""Learning curves: the stage's own evaluation at fixed fractions of its training steps.

A claim read at one budget says nothing about the budget it needed; the same evaluation at 0, ¼, ½ and
all of the steps says whether the number was still rising. `CurveCallback` runs a stage-supplied
evaluation inside the trainer (a transformers `TrainerCallback`), logs each point to the active MLflow
run as `curve.<name>` at the trainer's step, and appends it to a JSON-lines file in the checkpoint folder,
so a run that is killed and resumed keeps the points it already paid for.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import mlflow
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from mimesis_rl.training.launch import RUN_ID_ENV

log = logging.getLogger(__name__)

DEFAULT_FRACTIONS = (0.0, 0.25, 0.5, 1.0)
Evaluate = Callable[[Any, int], Mapping[str, float]]


def curve_steps(max_steps: int, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> list[int]:
    """The trainer steps the fractions land on (rounded, deduplicated, in order)."""
    if max_steps <= 0:
        return [0]
    return sorted({min(max_steps, max(0, round(f * max_steps))) for f in fractions})


def read_curve(path: str | Path) -> list[dict[str, float]]:
    """The points a curve file holds, one per step (the last written wins), by step."""
    points: dict[int, dict[str, float]] = {}
    p = Path(path)
    if p.exists():
        for line in p.read_text().splitlines():
            if line.strip():
                point = json.loads(line)
                points[int(point["step"])] = point
    return [points[s] for s in sorted(points)]


class CurveCallback(TrainerCallback):
    """Runs `evaluate(model, step)` at `steps` (step 0 before the first update) and records the points.

    The model is put in eval mode for the evaluation and back in train mode after it; the evaluation must
    not change the weights. Only the main process evaluates (the others wait at the next collective).
    """

    def __init__(self, evaluate: Evaluate, steps: Sequence[int], path: str | Path) -> None:
        self.evaluate = evaluate
        self.steps = set(steps)
        self.path = Path(path)
        active = mlflow.active_run()
        self.run_id = active.info.run_id if active else os.environ.get(RUN_ID_ENV)
        self.done = {int(p["step"]) for p in read_curve(self.path)}

    @property
    def points(self) -> list[dict[str, float]]:
        return read_curve(self.path)

    def _point(self, state: TrainerState, model: Any) -> None:
        step = int(state.global_step)
        if step not in self.steps or step in self.done or not state.is_world_process_zero or model is None:
            return
        started = time.perf_counter()
        was_training = model.training
        model.eval()
        try:
            values = {k: float(v) for k, v in self.evaluate(model, step).items()}
        finally:
            model.train(was_training)
        point = {"step": step, **values, "seconds": round(time.perf_counter() - started, 2)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(point) + "\n")
        self.done.add(step)
        log.info("curve at step %d: %s", step, values)
        if self.run_id:
            now = int(time.time() * 1000)
            try:
                mlflow.MlflowClient().log_batch(self.run_id, metrics=[
                    mlflow.entities.Metric(f"curve.{k}", v, now, step) for k, v in values.items()])
            except mlflow.exceptions.MlflowException as exc:  # never kill training over telemetry
                log.warning("could not log curve metrics to MLflow: %s", exc)

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       model: Any = None, **kwargs: Any) -> None:
        self._point(state, model)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    model: Any = None, **kwargs: Any) -> None:
        self._point(state, model)
