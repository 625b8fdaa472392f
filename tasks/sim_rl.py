"""Stage `sim_rl`: GRPO on the SFT simulator with fidelity and goal rewards, prompts from several
domains (corpus contexts and environment dialogues on goal cards).

    python -m tasks.sim_rl [--profile tiny]

Reads `sim_rl` in params.yaml (reward weights, labeler, discriminator, `trainer:` GRPO options).
Writes the RL simulator folder (with its realism discriminator) and registers it as a new version
of `mimesis-simulator` with alias `candidate`.
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.simulator.registry import register_simulator
from mimesis_rl.simulator.rl import RLSettings, train_rl
from mimesis_rl.tracking import content_hash
from mimesis_rl.training.config import stage_section
from mimesis_rl.training.launch import run_stage
from tasks._runner import main

STAGE = "sim_rl"


def settings(params: dict[str, Any]) -> tuple[RLSettings, dict[str, Any]]:
    section, registry = stage_section(params, STAGE)
    return RLSettings.from_section(section), registry


def inputs(params: dict[str, Any]) -> list[str]:
    s, _ = settings(params)
    return [s.sft_dir, s.train]


def run(params: dict[str, Any]) -> dict[str, Any]:
    s, registry = settings(params)
    seed = int(params.get("seed", 0))
    data_hash = content_hash(s.train)
    payload = {"seed": seed, "data_hash": data_hash, "label_params": {"label": params.get("label")}}
    metrics = run_stage("mimesis_rl.simulator.rl", train_rl, s, payload, seed=seed, data_hash=data_hash,
                        label_params=params)
    metrics.update(register_simulator(s.output_dir, registry, f"md5:{data_hash}"))
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
