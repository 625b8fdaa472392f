"""`CSDTrainer`: the agent's GRPO trainer with CSD, through the hooks `AgentGRPOTrainer` documents."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from mimesis_rl.agent.csd.driver import build_csd
from mimesis_rl.agent.csd.settings import CSDSettings
from mimesis_rl.agent.grpo import AgentGRPOTrainer, LossTerm


class CSDTrainer(AgentGRPOTrainer):
    """The agent's GRPO trainer with CSD (`agent_rl.csd`), as two overrides of its documented hooks.

    `form: advantage`: `_generate_and_score_completions` calls `super()` (TRL's scoring plus the agent
    trainer's episodes and metrics), then adds the per-token term to the advantages. `form: loss`:
    `additional_loss` is CSD's loss term. λ = 0 builds the driver (its coach) but runs nothing: plain
    RL. The driver is `self.csd` (its `last_notes` are the latest batch's notes); the time it takes
    is `timing["teacher_forward"]`.
    """

    def __init__(self, *args: Any, csd: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = CSDSettings.from_section(csd)
        self.csd = build_csd(
            settings,
            self.processing_class,
            self.accelerator.unwrap_model(self.model),
            seed=int(self.args.seed),
            temperature=float(self.temperature),
        )

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        settings = self.csd.settings
        if not settings.active or settings.form != "advantage":
            return output
        start = time.perf_counter()
        policy = self.accelerator.unwrap_model(self.model)
        metrics = self.csd.advantages(policy, output, self.state.global_step)
        self.timing["teacher_forward"].append(time.perf_counter() - start)
        self.record_metrics(metrics)
        return output

    def additional_loss(self, model: Any, inputs: dict[str, Any]) -> LossTerm | None:
        settings = self.csd.settings
        if not settings.active or settings.form != "loss":
            return super().additional_loss(model, inputs)
        return self.csd.extra_loss(self.accelerator.unwrap_model(model), inputs, self.state.global_step)
