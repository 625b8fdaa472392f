"""Stage `sim_sft`: supervised fine-tuning of the user simulator on the reasoning-annotated turns.

    python -m tasks.sim_sft [--profile tiny]

Reads `sim_sft` in params.yaml. Same command on CPU and GPU; `launcher: accelerate` runs the
training under `accelerate launch` with `accelerate_config` (multi-GPU / multi-node, DeepSpeed).
Writes the simulator folder (`output_dir`), logs metrics while training into this stage's MLflow
run, and registers the result as a new `mimesis-simulator` version (alias from `registry.alias`).
"""

from __future__ import annotations

import os
from typing import Any

from mimesis_rl.simulator.sft import SFTSettings, train_sft
from mimesis_rl.simulator.training import launch_worker, resolve_bf16
from mimesis_rl.tracking import PARENT_RUN_ENV, content_hash
from tasks._runner import main

STAGE = "sim_sft"


def settings(params: dict[str, Any]) -> tuple[SFTSettings, dict[str, Any]]:
    section = dict(params.get(STAGE) or {})
    registry = dict(section.pop("registry", None) or {})
    section["bf16"] = resolve_bf16(params, section)
    return SFTSettings.from_section(section), registry


def inputs(params: dict[str, Any]) -> list[str]:
    s, _ = settings(params)
    return [p for p in (s.train, s.val, s.base_model) if p]


def register(output_dir: str, registry: dict[str, Any], data_version: str) -> dict[str, Any]:
    """Log the simulator folder into the stage run and register a new version."""
    if not registry.get("register", True):
        return {}
    from mimesis_rl.simulator.registry import REGISTERED_NAME, log_simulator

    version = log_simulator(output_dir, name=registry.get("name", REGISTERED_NAME),
                            alias=registry.get("alias", "candidate"), data_version=data_version,
                            parent_run_id=os.environ.get(PARENT_RUN_ENV),
                            bundle=registry.get("bundle_base", "auto"),
                            max_bundle_mb=float(registry.get("max_bundle_mb", 200)))
    return {"registered_version": int(version.version)}


def run(params: dict[str, Any]) -> dict[str, Any]:
    s, registry = settings(params)
    seed = int(params.get("seed", 0))
    data_hash = content_hash(s.train)
    if s.launcher == "accelerate":
        payload = {"settings": s.to_json(), "seed": seed, "data_hash": data_hash}
        metrics = launch_worker("mimesis_rl.simulator.sft", payload, s.accelerate_config)
    else:
        metrics = train_sft(s, seed=seed, data_hash=data_hash)
    metrics.update(register(s.output_dir, registry, f"md5:{data_hash}"))
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
