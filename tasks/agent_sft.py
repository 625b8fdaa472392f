"""Stage `agent_sft`: warm-start the agent by cloning the scripted agents' winning transcripts in all
task domains against the training users (LoRA on the base, TRL SFTTrainer, loss on agent turns only),
then report success and valid-action rate per domain against those users.

    python -m tasks.agent_sft [--profile tiny]

Same command on CPU and GPU; `launcher: accelerate` runs the training under `accelerate launch` with
`accelerate_config` (mimesis_rl.training.launch).

Writes the agent folder (`agent_sft.output_dir`, mimesis.json role agent) and registers it as a
`mimesis-agent` version with alias `candidate-sft`.
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.tracking.registration import RegistrySettings
from mimesis_rl.training.config import stage_section
from tasks._runner import main

STAGE = "agent_sft"


def settings(params: dict[str, Any]) -> tuple[Any, RegistrySettings]:
    from mimesis_rl.agent.sft import AgentSFTSettings

    section, registry = stage_section(params, STAGE)
    return AgentSFTSettings.from_section(section), registry


def inputs(params: dict[str, Any]) -> list[str]:
    s, _ = settings(params)
    return [s.base_model]


def run(params: dict[str, Any]) -> dict[str, Any]:
    from mimesis_rl.agent.registry import log_agent
    from mimesis_rl.agent.sft import train_agent_sft
    from mimesis_rl.tracking import content_hash
    from mimesis_rl.training.launch import run_stage

    s, registry = settings(params)
    seed = int(params.get("seed", 0))
    metrics = run_stage("mimesis_rl.agent.sft", train_agent_sft, s, {"seed": seed}, seed=seed)
    if registry.register:
        metrics.update(log_agent(s.output_dir, "sft", user=",".join(s.users),
                                 data_version=f"scripted-bc:{content_hash('src/mimesis_rl/envs')}",
                                 registry=registry))
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
