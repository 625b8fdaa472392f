"""agent_rl's learning curve: its own greedy evaluation at 0, ¼, ½ and all of the GRPO steps.

The points are the stage's before/after evaluation (`agent.evaluate`, same seeds, domains and user)
run at more steps; each evaluation runs once: it is kept as JSON in the run's checkpoint folder, so the
curve's step 0 IS `eval_before`, its last step IS `eval_after`, and a killed run that resumes pays for
none of them again. `training.curves.CurveCallback` runs the points inside the trainer, logs
`curve.<key>` to MLflow per step and keeps them in `curve.jsonl` beside the evaluations.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mimesis_rl.agent.grpo import REF_ADAPTER
from mimesis_rl.agent.rl_settings import CURVE_KEYS, CurveSettings
from mimesis_rl.fsutil import write_json
from mimesis_rl.training.curves import CurveCallback, curve_steps

log = logging.getLogger(__name__)

CURVE_FILE = "curve.jsonl"


class GreedyEvaluations:
    """The stage's greedy evaluation by step, each computed once and kept under `folder/evals/`.

    `score(adapter)` is the stage's evaluation of one adapter (step 0: the frozen SFT adapter `ref`,
    whose weights the trained `default` starts from; later steps: `default`). Only the main process
    writes; the others read what is there or compute their own.
    """

    def __init__(self, score: Callable[[str], dict[str, Any]], folder: str | Path, main: bool = True) -> None:
        self.score = score
        self.folder = Path(folder) / "evals"
        self.main = main
        self.spent = 0.0  # seconds this process spent evaluating (kept evaluations cost nothing)

    def at(self, step: int) -> dict[str, Any]:
        """The full evaluation at `step` (per domain, means, dialogues): a fresh copy each call."""
        path = self.folder / f"step-{step}.json"
        if path.exists():
            return json.loads(path.read_text())["result"]
        started = time.perf_counter()
        result = self.score(REF_ADAPTER if step == 0 else "default")
        seconds = round(time.perf_counter() - started, 2)
        self.spent += seconds
        log.info("greedy evaluation at step %d: %s (%.1f s)", step, result.get("mean"), seconds)
        if self.main:
            write_json(path, {"step": step, "seconds": seconds, "result": result})
        return json.loads(json.dumps(result, default=str))  # the same shape as a kept one

    def seconds(self, step: int) -> float:
        """What the evaluation at `step` cost when it ran (0 if it is not kept)."""
        path = self.folder / f"step-{step}.json"
        return float(json.loads(path.read_text())["seconds"]) if path.exists() else 0.0

    def point(self, model: Any, step: int) -> dict[str, float]:
        """`CurveCallback`'s evaluation: the means of `at(step)` (the model is the stage's own)."""
        means = self.at(step)["mean"]
        return {**{k: float(means[k]) for k in CURVE_KEYS}, "eval_seconds": self.seconds(step)}


def curve_callback(evals: GreedyEvaluations, settings: CurveSettings, max_steps: int,
                   folder: str | Path) -> CurveCallback:
    """The trainer callback recording the curve at `curve_steps(max_steps, fractions)` into
    `folder/curve.jsonl` (the run's checkpoint folder: a resumed run keeps its points); with
    `settings.select`, it keeps the best point's weights and restores them when training ends."""
    return CurveCallback(evals.point, curve_steps(max_steps, settings.fractions), Path(folder) / CURVE_FILE,
                         select=settings.select)
