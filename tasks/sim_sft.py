"""Stage `sim_sft`: supervised fine-tuning of the user simulator on the reasoning-annotated turns and
on environment dialogues (goal cards).

    python -m tasks.sim_sft [--profile tiny]

Reads `sim_sft` in params.yaml. Same command on CPU and GPU; `launcher: accelerate` runs the
training under `accelerate launch` with `accelerate_config` (multi-GPU / multi-node, DeepSpeed).
Writes the simulator folder (`output_dir`), logs metrics while training into this stage's MLflow
run, and registers the result as a new `mimesis-simulator` version (alias from `registry.alias`).
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.simulator.registry import register_simulator
from mimesis_rl.simulator.sft import SFTSettings, train_sft
from mimesis_rl.tracking import content_hash
from mimesis_rl.training.config import stage_section
from mimesis_rl.training.launch import run_stage
from tasks._runner import main

STAGE = "sim_sft"


def settings(params: dict[str, Any]) -> tuple[SFTSettings, dict[str, Any]]:
    section, registry = stage_section(params, STAGE)
    return SFTSettings.from_section(section), registry


def inputs(params: dict[str, Any]) -> list[str]:
    s, _ = settings(params)
    return [p for p in (s.train, s.val, s.base_model) if p]


def run(params: dict[str, Any]) -> dict[str, Any]:
    s, registry = settings(params)
    seed = int(params.get("seed", 0))
    data_hash = content_hash(s.train)
    metrics = run_stage("mimesis_rl.simulator.sft", train_sft, s, {"seed": seed, "data_hash": data_hash},
                        seed=seed, data_hash=data_hash)
    metrics.update(register_simulator(s.output_dir, registry, f"md5:{data_hash}"))
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
