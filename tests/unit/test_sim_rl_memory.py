"""sim_rl's memory settings in params.yaml: each GRPO step generates and scores one batch of 8
completions (2 prompts x 4), but forward/backward runs on micro-batches of 4 with checkpointed layers
(benchmarks/sim_memory.py: on CPU TRL's fused LM head scores every position of the micro-batch, so the
stage's peak RSS follows it). TRL's own arithmetic (GRPOConfig) says what a step holds. And the
benchmark's one-lever-per-run switch leaves nothing behind in the project's params."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mimesis_rl.config import load_params
from mimesis_rl.simulator.rl import RLSettings
from mimesis_rl.training.config import stage_section, trainer_config

ROOT = Path(__file__).resolve().parents[2]


def _config(profile: str | None, tmp_path: Path):
    """GRPOConfig of sim_rl on `profile` (None: the top-level defaults, no profile applied)."""
    if profile is None:
        params = yaml.safe_load((ROOT / "params.yaml").read_text())
        params.pop("profiles")
    else:
        params = load_params(ROOT / "params.yaml", profile=profile)
    section, _ = stage_section(params, "sim_rl")
    settings = RLSettings.from_section(section)
    return trainer_config(settings, tmp_path, 0, "sim_rl", save_strategy="steps")


@pytest.mark.parametrize("profile", ["demo", None])
def test_eight_completions_per_step_scored_in_micro_batches_of_four(profile: str | None,
                                                                    tmp_path: Path) -> None:
    config = _config(profile, tmp_path)
    assert config.generation_batch_size == 8 and config.num_generations == 4  # 2 prompts x 4 per step
    assert config.per_device_train_batch_size == 4 and config.steps_per_generation == 2
    assert config.gradient_accumulation_steps == config.steps_per_generation  # generated once per step
    assert config.gradient_checkpointing


def test_code_defaults_hold_the_same_micro_batches(tmp_path: Path) -> None:
    config = trainer_config(RLSettings.from_section({}), tmp_path, 0, "sim_rl")
    assert config.generation_batch_size == 8 and config.per_device_train_batch_size == 4
    assert config.steps_per_generation == config.gradient_accumulation_steps == 2
    assert config.gradient_checkpointing


def test_tiny_keeps_four_completions_per_step(tmp_path: Path) -> None:
    config = _config("tiny", tmp_path)
    assert config.generation_batch_size == 4 and config.num_generations == 2
    assert config.per_device_train_batch_size == 2 and config.steps_per_generation == 2


def test_benchmark_sets_one_lever_for_one_run(tmp_path: Path) -> None:
    from benchmarks.sim_memory import set_steps

    params = {"sim_rl": {"trainer": {"max_steps": 16, "per_device_train_batch_size": 8},
                         "rewards": {"format": 1}},
              "profiles": {"demo": {"sim_rl": {"trainer": {"max_steps": 2, "per_device_train_batch_size": 2},
                                               "rewards": {"realism": 1.0}}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    set_steps(tmp_path, 1, {"per_device_train_batch_size": 4}, cheap_rewards=True)
    out = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert out["sim_rl"]["trainer"] == {"max_steps": 1, "per_device_train_batch_size": 4}
    assert out["sim_rl"]["rewards"] == {"format": 1, "realism": 0.0, "pattern_fidelity": 0.0}
    assert out["profiles"]["demo"]["sim_rl"] == {"trainer": {}}  # nothing in the profile overrides the run
