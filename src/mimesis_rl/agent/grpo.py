"""`AgentGRPOTrainer`: TRL's GRPOTrainer for whole dialogues, the trainer of `agent_rl`.

It overrides only what it must: `_generate_and_score_completions` (episode records and per-step
metrics beside TRL's) and `compute_loss` (the `additional_loss` hook). CSD (`agent.csd.trainer.CSDTrainer`)
is a subclass of it; `agent.rl_trainer.build_trainer` picks the class from params.yaml.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

from mimesis_rl.training.trainers import DropEmptyParamGroups, LabelledPositionsOnly

REF_ADAPTER = "ref"  # the frozen SFT agent: TRL's KL reference when beta > 0, and the logged KL's
LossTerm = tuple[torch.Tensor, dict[str, float]]  # (loss added to GRPO's, metrics logged with TRL's)
ExtraLoss = Callable[[Any, dict[str, Any]], LossTerm]


def _trainer_base() -> type:
    from trl import GRPOTrainer

    return GRPOTrainer


class AgentGRPOTrainer(DropEmptyParamGroups, LabelledPositionsOnly, _trainer_base()):  # type: ignore[misc]
    """TRL's GRPOTrainer for whole dialogues, with hooks for what CSD adds (`agent.csd.trainer.CSDTrainer`).

    The hooks (override them in a subclass; call `super()` for the base behaviour):

    - `_generate_and_score_completions(inputs) -> output`: TRL's generation batch, scored, with
      `output["episodes"]` added; a subclass may rewrite `output["advantages"]` after `super()`
      (CSD's `advantage` form).
    - `additional_loss(model, inputs) -> (loss_tensor, metrics) | None` is called in `compute_loss`
      on every micro-batch and its tensor is ADDED to TRL's GRPO loss (weight it yourself, e.g.
      λ·KL); the metrics (floats) are logged under their own names with TRL's (MLflow, each logging
      step). The base calls the `extra_loss` callable given to the constructor (None: no term).
    - `inputs` is TRL's micro-batch: `prompt_ids` (left-padded), `prompt_mask`, `completion_ids`
      (right-padded), `completion_mask`, `tool_mask` (= our env_mask: 1 on agent tokens),
      `advantages`, and `episodes`: one dict per row (same order, shuffled together by TRL) with the
      transcript `turns` (role, content, the user's private `reasoning`, patterns, meta), `goal`
      (text, slots, private), `domain`, `seed`, `episode_id`, `verdict`, `agent_spans` (list of
      [start, end) of each agent turn in that row's `completion_ids`, i.e. positions after the prompt)
      and `prompt_len` (unpadded prompt length). Agent turn i of the trace is `agent_spans[i]`.
    - Time spent in the hook is recorded as `timing["teacher_forward"]` (for benchmarks/agent.py).

    Logged per step besides TRL's own (`reward`, `reward_std`, `frac_reward_zero_std`, the reward's parts
    `rewards/{success,verifier,agent_turns}/mean` of `agent.rl_reward`, ...):
    `success/<domain>`, `groups/dead_share` (groups where every member failed),
    `kl_to_sft` (k3 estimate on agent tokens, sampling log-probs vs the frozen SFT adapter `ref`),
    `rollout/seconds`, `rollout/agent_tokens_per_s`, `rollout/invalid_actions`.
    """

    def __init__(
        self, *args: Any, extra_loss: ExtraLoss | None = None, kl_to_sft: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.extra_loss = extra_loss
        self.kl_to_sft = kl_to_sft
        self._pending_episodes: list[dict[str, Any]] | None = None
        self._rollout_stats: dict[str, Any] = {}
        self.timing: dict[str, list[float]] = defaultdict(list)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        episodes, self._pending_episodes = self._pending_episodes, None
        if episodes is None:
            raise RuntimeError("AgentGRPOTrainer needs the agent rollout_func (no episode records arrived)")
        output["episodes"] = episodes
        mode = "train" if self.model.training else "eval"
        metrics = self._metrics[mode]
        stats = self._rollout_stats
        self.timing["rollout"].append(stats["seconds"])
        metrics["rollout/seconds"].append(stats["seconds"])
        metrics["rollout/agent_tokens_per_s"].append(stats["agent_tokens"] / max(stats["seconds"], 1e-9))
        metrics["rollout/invalid_actions"].append(float(stats["invalid_actions"]))
        by_domain: dict[str, list[float]] = defaultdict(list)
        for ep in episodes:
            by_domain[ep["domain"]].append(1.0 if ep.get("success") else 0.0)
        for domain, values in by_domain.items():
            metrics[f"success/{domain}"].append(sum(values) / len(values))
        k = self.num_generations if mode == "train" else self.num_generations_eval
        groups = [episodes[i : i + k] for i in range(0, len(episodes), k)]
        dead = sum(1 for g in groups if not any(ep.get("success") for ep in g))
        metrics["groups/dead_share"].append(dead / max(1, len(groups)))
        if self.kl_to_sft and output.get("sampling_per_token_logps") is not None:
            start = time.perf_counter()
            metrics["kl_to_sft"].append(self._kl_to_sft(output))
            self.timing["kl_forward"].append(time.perf_counter() - start)
        return output

    @torch.no_grad()
    def _kl_to_sft(self, output: dict[str, Any]) -> float:
        from trl.trainer.utils import use_adapter

        model = self.accelerator.unwrap_model(self.model)
        if REF_ADAPTER not in getattr(model, "peft_config", {}):
            return float("nan")
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        keep = output["completion_ids"].size(1)
        with use_adapter(model, adapter_name=REF_ADAPTER):
            ref, _, _ = self._get_per_token_logps_and_entropies(
                self.model, ids, attention, keep, batch_size=self.args.per_device_train_batch_size
            )
        mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        delta = (ref - output["sampling_per_token_logps"]).clamp(-20, 20)
        k3 = torch.exp(delta) - delta - 1
        return float((k3 * mask).sum() / mask.sum().clamp(min=1))

    def compute_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> torch.Tensor:
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        start = time.perf_counter()
        term = self.additional_loss(model, inputs)
        if term is None:
            return loss
        self.timing["teacher_forward"].append(time.perf_counter() - start)
        extra, logged = term
        self.record_metrics(logged)
        return loss + extra

    def additional_loss(self, model: Any, inputs: dict[str, Any]) -> LossTerm | None:
        """A loss term added to GRPO's on this micro-batch, with its metrics; None: nothing to add."""
        return None if self.extra_loss is None else self.extra_loss(model, inputs)

    def record_metrics(self, metrics: dict[str, float]) -> None:
        """Add per-step numbers to what TRL logs at the next logging step (train or eval mode)."""
        mode = "train" if self.model.training else "eval"
        for name, value in metrics.items():
            self._metrics[mode][name].append(float(value))


class StepTimer:
    """A TrainerCallback recording each optimisation step's wall time into `trainer.timing["step"]`."""

    def __new__(cls, trainer: AgentGRPOTrainer) -> Any:
        from transformers import TrainerCallback

        class _Timer(TrainerCallback):
            def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                self.start = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                trainer.timing["step"].append(time.perf_counter() - self.start)

        return _Timer()
