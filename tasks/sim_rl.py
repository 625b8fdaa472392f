"""Stage `sim_rl`: GRPO on the SFT simulator with fidelity rewards, prompts from several domains.

    python -m tasks.sim_rl [--profile tiny]

Reads `sim_rl` in params.yaml (reward weights, labeler, discriminator, GRPO knobs). Writes the
RL simulator folder (with its realism discriminator) and registers it as a new version of
`mimesis-simulator` with alias `candidate`.
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.simulator.rl import RLSettings, train_rl
from mimesis_rl.simulator.training import launch_worker, resolve_bf16
from mimesis_rl.tracking import content_hash
from tasks._runner import main
from tasks.sim_sft import register

STAGE = "sim_rl"


def settings(params: dict[str, Any]) -> tuple[RLSettings, dict[str, Any]]:
    section = dict(params.get(STAGE) or {})
    registry = dict(section.pop("registry", None) or {})
    section["bf16"] = resolve_bf16(params, section)
    return RLSettings.from_section(section), registry


def inputs(params: dict[str, Any]) -> list[str]:
    s, _ = settings(params)
    return [s.sft_dir, s.train]


def run(params: dict[str, Any]) -> dict[str, Any]:
    s, registry = settings(params)
    seed = int(params.get("seed", 0))
    data_hash = content_hash(s.train)
    if s.launcher == "accelerate":
        payload = {"settings": s.to_json(), "seed": seed, "data_hash": data_hash,
                   "label_params": {"label": params.get("label")}}
        metrics = launch_worker("mimesis_rl.simulator.rl", payload, s.accelerate_config)
    else:
        metrics = train_rl(s, seed=seed, data_hash=data_hash, label_params=params)
    metrics.update(register(s.output_dir, registry, f"md5:{data_hash}"))
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
