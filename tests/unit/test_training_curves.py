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


def _end(callback: CurveCallback, model: torch.nn.Module, step: int) -> None:
    args, control = TrainingArguments(output_dir="unused", use_cpu=True, report_to=[]), TrainerControl()
    state = TrainerState()
    state.global_step = step
    callback.on_train_end(args, state, control, model=model)


def test_select_saves_the_best_points_weights_and_survives_a_resume(tmp_path: Path) -> None:
    """The weights at each step are the step number; the score peaks at step 2, then falls (what 12
    GRPO steps did to the simulator): the model saved holds step 2's weights, not step 8's."""
    model = torch.nn.Linear(2, 1)
    frozen = torch.nn.Parameter(torch.zeros(1), requires_grad=False)
    model.register_parameter("frozen", frozen)
    scores = {0: 0.5, 2: 0.75, 4: 0.25, 8: 0.25}

    def evaluate(m: torch.nn.Module, step: int) -> dict[str, float]:
        return {"success": scores[step], "reward": 0.0}

    def set_step(step: int) -> None:
        with torch.no_grad():
            model.weight.fill_(step)
            model.bias.fill_(step)
            model.frozen.fill_(-1.0)  # not trainable: never saved nor restored

    path = tmp_path / "curve.jsonl"

    class Stepping(CurveCallback):  # the trainer updates the weights before each on_step_end
        def on_step_end(self, args, state, control, model=None, **kwargs):  # type: ignore[no-untyped-def]
            set_step(state.global_step)
            super().on_step_end(args, state, control, model=model, **kwargs)

    set_step(0)
    _drive(Stepping(evaluate, curve_steps(8), path, select=("success", "reward")), model, range(0, 3))
    resumed = Stepping(evaluate, curve_steps(8), path, select=("success", "reward"))  # killed, resumed
    _drive(resumed, model, range(3, 8))
    assert model.weight.detach()[0, 0].item() == 8.0
    _end(resumed, model, 8)
    assert resumed.restored == 2 and resumed.selected is not None and resumed.selected["step"] == 2
    assert torch.all(model.weight == 2.0) and torch.all(model.bias == 2.0)
    assert float(model.frozen) == -1.0


def test_select_ties_go_to_the_later_step_and_no_select_keeps_the_last(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 1)
    flat = CurveCallback(lambda m, s: {"success": 0.0}, curve_steps(4), tmp_path / "a" / "curve.jsonl",
                         select=("success",))
    _drive(flat, model, range(0, 4))
    _end(flat, model, 4)
    assert flat.restored == 4
    plain = CurveCallback(lambda m, s: {"success": 1.0 - s}, curve_steps(4), tmp_path / "b" / "curve.jsonl")
    _drive(plain, model, range(0, 4))
    _end(plain, model, 4)
    assert plain.selected is None and plain.restored is None
    assert not (tmp_path / "b" / "curve_best.safetensors").exists()


def test_select_names_only_what_a_point_holds() -> None:
    import pytest

    from mimesis_rl.agent.rl_settings import CurveSettings as AgentCurve
    from mimesis_rl.simulator.curve import CurveSettings as SimulatorCurve

    with pytest.raises(ValueError, match="env_succes"):
        SimulatorCurve(select=["env_succes"])
    with pytest.raises(ValueError, match="success"):
        AgentCurve(select=("success",))
    assert AgentCurve(select=["success_rate"]).select == ("success_rate",)
