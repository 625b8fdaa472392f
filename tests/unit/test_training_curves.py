"""The learning-curve callback: points at the fractions' steps, once each, kept across a resume."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import TrainerControl, TrainerState, TrainingArguments

from mimesis_rl.training.curves import CurveCallback, curve_steps, read_curve


def test_fractions_land_on_whole_steps() -> None:
    assert curve_steps(16) == [0, 4, 8, 16]
    assert curve_steps(2) == [0, 1, 2]
    assert curve_steps(0) == [0]


def _drive(callback: CurveCallback, model: torch.nn.Module, steps: range) -> None:
    args, control = TrainingArguments(output_dir="unused", use_cpu=True, report_to=[]), TrainerControl()
    state = TrainerState()
    state.global_step = steps.start
    callback.on_train_begin(args, state, control, model=model)
    for step in steps:
        state.global_step = step + 1
        callback.on_step_end(args, state, control, model=model)


def test_points_at_their_steps_in_eval_mode_and_kept_across_a_resume(tmp_path: Path) -> None:
    seen: list[tuple[int, bool]] = []
    model = torch.nn.Linear(2, 1)

    def evaluate(m: torch.nn.Module, step: int) -> dict[str, float]:
        seen.append((step, m.training))
        return {"score": float(step) / 8}

    path = tmp_path / "curve.jsonl"
    model.train()
    _drive(CurveCallback(evaluate, curve_steps(8), path), model, range(0, 3))  # killed after step 3
    assert [s for s, _ in seen] == [0, 2]
    assert not any(training for _, training in seen) and model.training

    _drive(CurveCallback(evaluate, curve_steps(8), path), model, range(3, 8))  # resumed at step 3
    assert [s for s, _ in seen] == [0, 2, 4, 8]
    points = read_curve(path)
    assert [p["step"] for p in points] == [0, 2, 4, 8]
    assert [p["score"] for p in points] == [0.0, 0.25, 0.5, 1.0]
