"""Learning curves: the stage's own evaluation at fixed fractions of its training steps.

A claim read at one budget says nothing about the budget it needed; the same evaluation at 0, ¼, ½ and
all of the steps says whether the number was still rising. `CurveCallback` runs a stage-supplied
evaluation inside the trainer (a transformers `TrainerCallback`), logs each point to the active MLflow
run as `curve.<name>` at the trainer's step, and appends it to a JSON-lines file in the checkpoint folder,
so a run that is killed and resumed keeps the points it already paid for.

With `select` (metric names, compared in order), the callback also keeps the trainable weights of the
best point so far (`curve_best.safetensors` beside the curve file) and puts them back when training
ends, so the stage saves the model its own held-out evaluation preferred, not merely the last: a short
RL run on a noisy reward can undo what the warm start had (measured in issue 27: 12 GRPO steps took
the simulator's environment success from 0.5 to 0.125). Ties go to the later step.
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
import torch
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

    def __init__(self, evaluate: Evaluate, steps: Sequence[int], path: str | Path,
                 select: Sequence[str] = ()) -> None:
        self.evaluate = evaluate
        self.steps = set(steps)
        self.path = Path(path)
        self.select = tuple(select)
        self.best_path = self.path.with_name("curve_best.safetensors")
        active = mlflow.active_run()
        self.run_id = active.info.run_id if active else os.environ.get(RUN_ID_ENV)
        self.done = {int(p["step"]) for p in read_curve(self.path)}
        self.restored: int | None = None

    @property
    def selected(self) -> dict[str, float] | None:
        """The point whose weights are kept (the best by `select`, ties to the later), or None."""
        if not self.select:
            return None
        ranked = [p for p in self.points if all(k in p for k in self.select)]
        return max(ranked, key=lambda p: (*(p[k] for k in self.select), p["step"]), default=None)

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
        if self.select and (best := self.selected) is not None and int(best["step"]) == step:
            self._keep(model)
        if self.run_id:
            now = int(time.time() * 1000)
            try:
                mlflow.MlflowClient().log_batch(self.run_id, metrics=[
                    mlflow.entities.Metric(f"curve.{k}", v, now, step) for k, v in values.items()])
            except mlflow.exceptions.MlflowException as exc:  # never kill training over telemetry
                log.warning("could not log curve metrics to MLflow: %s", exc)

    def _keep(self, model: Any) -> None:
        from safetensors.torch import save_file

        if any(hasattr(p, "ds_id") for p in model.parameters()):  # ZeRO-3 partitions: no whole copy here
            log.warning("curve selection needs whole weights (ZeRO-3 partitions them): the last step is kept")
            self.select = ()
            return
        trained = (p for p in model.named_parameters() if p[1].requires_grad)
        weights = {name: p.detach().to("cpu").contiguous() for name, p in trained}
        tmp = self.best_path.with_suffix(".tmp")
        save_file(weights, str(tmp))
        tmp.replace(self.best_path)  # a kill mid-write leaves the previous best whole

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     model: Any = None, **kwargs: Any) -> None:
        best = self.selected
        if best is None or model is None or not state.is_world_process_zero or not self.best_path.exists():
            return
        self.restored = int(best["step"])
        if self.restored == int(state.global_step):
            return  # the last step is the best: the weights are already these
        from safetensors.torch import load_file

        params = dict(model.named_parameters())
        with torch.no_grad():
            for name, tensor in load_file(str(self.best_path)).items():
                params[name].copy_(tensor.to(params[name].device, params[name].dtype))
        log.info("curve selection: the weights of step %d (best %s) replace step %d's",
                 self.restored, {k: best[k] for k in self.select}, state.global_step)

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       model: Any = None, **kwargs: Any) -> None:
        self._point(state, model)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    model: Any = None, **kwargs: Any) -> None:
        self._point(state, model)
