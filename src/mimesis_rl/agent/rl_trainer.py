"""The agent GRPO trainer, assembled: the policy from `sft_dir`, the frozen training user, TRL's config.

`build_trainer` picks `AgentGRPOTrainer` or CSD's subclass of it (`agent.csd.trainer.CSDTrainer`) from
the settings and wires in `rl_rollout`'s rows and `rollout_func` and `rl_reward`'s outcome-first reward.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mimesis_rl.agent.grpo import REF_ADAPTER, AgentGRPOTrainer, ExtraLoss, StepTimer
from mimesis_rl.agent.rl_reward import reward_funcs
from mimesis_rl.agent.rl_rollout import make_rollout_func, prompt_rows
from mimesis_rl.agent.rl_settings import AgentRLSettings
from mimesis_rl.models.artifact import DEFAULT_SAMPLING
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.training.config import precision_kwargs, trainer_config
from mimesis_rl.training.policy import load_trainable_adapter
from mimesis_rl.training.trainers import MlflowMetricsCallback

if TYPE_CHECKING:
    from mimesis_rl.agent.users import UserFactory


def load_policy(sft_dir: str | Path, base_model: str | Path, bf16: bool) -> tuple[Any, Any]:
    """(PeftModel with the SFT adapter as trainable `default` and frozen `ref`, tokenizer)."""
    from mimesis_rl.models.artifact import read_manifest
    from mimesis_rl.models.loading import load_tokenizer

    sft_dir = Path(sft_dir)
    manifest = read_manifest(sft_dir)
    if manifest.role != "agent" or manifest.kind != "lora":
        raise ValueError(
            f"{sft_dir}: expected a LoRA agent folder (mimesis.json role agent, kind lora), "
            f"got role {manifest.role}, kind {manifest.kind}"
        )
    adapter = sft_dir / "adapter"
    model = load_trainable_adapter(base_model, adapter, bf16, frozen={REF_ADAPTER: adapter})
    tokenizer = load_tokenizer(sft_dir / "tokenizer" if (sft_dir / "tokenizer").is_dir() else base_model)
    return model, tokenizer


def training_users(settings: AgentRLSettings, model: Any, tokenizer: Any, seed: int = 0) -> UserFactory:
    """The frozen training user of `settings.user`, on the policy's weights, with its decoding caps: the
    project's user sampling for a prompted user, a learned one's own capped at `user_max_new_tokens`."""
    from mimesis_rl.agent.users import UserFactory

    return UserFactory(
        settings.user,
        model,
        tokenizer,
        replace(DEFAULT_SAMPLING, max_new_tokens=settings.user_max_new_tokens),
        seed=seed,
        base_model=settings.base_model,
        max_context_tokens=settings.user_max_context_tokens,
        max_new_tokens=settings.user_max_new_tokens,
    )


def vllm_options(section: dict[str, Any]) -> dict[str, Any]:
    """TRL's vLLM fields for `GRPOConfig` (nothing when off). On: vLLM and a CUDA device must be there,
    said now rather than deep inside TRL; unknown `vllm_*` names are refused by GRPOConfig itself."""
    if not section or not section.get("use_vllm"):
        return {}
    import importlib.util

    missing = [what for what, ok in (("the vllm package", importlib.util.find_spec("vllm") is not None),
                                     ("a CUDA device", torch.cuda.is_available())) if not ok]
    if missing:
        raise ValueError(f"agent_rl.vllm.use_vllm is on but {' and '.join(missing)} is missing: TRL's vLLM "
                         "mode is for GPUs; switch it off (the default) to generate in-process")
    return dict(section)


def build_trainer(
    settings: AgentRLSettings,
    seed: int = 0,
    extra_loss: ExtraLoss | None = None,
    model: Any = None,
    tokenizer: Any = None,
    output_dir: str | Path | None = None,
) -> AgentGRPOTrainer:
    """The trainer over a policy from `sft_dir` (or the given PeftModel), against `settings.user`;
    checkpoints go to `output_dir` (default: `settings.checkpoint_dir`). With `csd.enabled` (and no
    `extra_loss` given) it is CSD's subclass, `agent.csd.trainer.CSDTrainer`."""
    from datasets import Dataset

    if model is None:
        bf16 = bool(precision_kwargs(settings.device, settings.bf16).get("bf16"))
        model, tokenizer = load_policy(settings.sft_dir, settings.base_model, bf16)
    users = training_users(settings, model, tokenizer, seed)
    sampling = SamplingParams(
        max_new_tokens=settings.agent_max_new_tokens,
        do_sample=True,
        temperature=settings.option("temperature"),
        top_p=settings.option("top_p"),
    )
    config = trainer_config(settings, output_dir or settings.checkpoint_dir, seed, "agent_rl",
                            save_strategy="steps", reward_weights=settings.reward.trl_weights,
                            multi_objective_aggregation="sum_then_normalize", **vllm_options(settings.vllm))
    rows = prompt_rows(settings.domain_list, settings.prompts_per_domain)
    kwargs: dict[str, Any] = {}
    trainer_cls: type[AgentGRPOTrainer] = AgentGRPOTrainer
    if settings.csd.get("enabled") and extra_loss is None:
        from mimesis_rl.agent.csd.trainer import CSDTrainer

        trainer_cls, kwargs = CSDTrainer, {"csd": settings.csd}
    trainer = trainer_cls(
        model=model,
        reward_funcs=reward_funcs(),
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        rollout_func=make_rollout_func(users, tokenizer, sampling, settings.max_turns, seed),
        callbacks=[MlflowMetricsCallback("agent_rl")],
        extra_loss=extra_loss,
        kl_to_sft=settings.kl_to_sft,
        **kwargs,
    )
    trainer.add_callback(StepTimer(trainer))
    trainer.user_factory = users
    return trainer
