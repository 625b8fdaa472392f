"""Agent SFT (warm start): behaviour-clone the scripted agents' winning transcripts with TRL's
`SFTTrainer` (LoRA on the base, loss on the agent's turns only), then play a short evaluation against
the training users and report success and valid-action rate per domain.

    python -m tasks.agent_sft [--profile tiny]
    accelerate launch --config_file infra/accelerate/cpu_multi.yaml -m mimesis_rl.agent.sft PAYLOAD.json
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from mimesis_rl.agent.artifact import LONGEST_TURN, longest_turn_tokens, save_agent
from mimesis_rl.agent.data import action_span, clone_examples
from mimesis_rl.models.artifact import DEFAULT_SAMPLING
from mimesis_rl.models.config import LoraSettings
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.settings import from_section
from mimesis_rl.training.checkpoints import checkpoint_folder, finish, train
from mimesis_rl.training.config import (
    TrainingSettings,
    parse_settings,
    precision_kwargs,
    trainer_config,
)
from mimesis_rl.training.launch import worker_main
from mimesis_rl.training.policy import load_base_model
from mimesis_rl.training.trainers import MlflowMetricsCallback, first_last, with_clean_param_groups

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentSFTSettings(TrainingSettings):
    """Agent SFT (`agent_sft:` in params.yaml).

    Data:
        domains: task domains (null = all 8); users: training user specs the scripted agent plays
            (scripted presets; `learned:`/`prompted:` specs work too, at model cost); per_domain:
            winning transcripts kept per domain, or a count per domain ({campsite: 96, bargain: 12});
            max_turns: env turn limit override (null = domain's).
        action_weight: the tokens of each transcript's final action (the deal it closed: a campsite
            split's three counts) count this many times in the loss (`training.span_weights`); 1 = as
            any token. Why: those few tokens decide success and are ~3% of the agent's tokens.
    Model:
        base_model, lora.
    Training: TRL `SFTConfig` fields, at the top level as params.yaml writes them or under `trainer:`
        (see TRAINER_DEFAULTS): max_steps (-1 = epochs), num_train_epochs, learning_rate, batch_size,
        grad_accum, logging_steps, ... max_length: tokens per transcript; longer ones are left out and
        counted (`too_long`), since cutting them would drop the final action the agent must learn.
        save_steps: a checkpoint every this many steps under `checkpoint_dir` (keyed by the settings and
        seed); an interrupted run resumes from the newest. keep_checkpoints: keep them after the agent
        folder is saved. Hardware and launcher: see TrainingSettings.
    Evaluation:
        eval_users (null = the training users), eval_seeds (dialogues per domain and user), eval_domains
        (null = `domains`), generation: the agent's decoding (also written to the folder).
    """

    domains: list[str] | None = None
    users: list[str] = field(default_factory=lambda: ["scripted:cooperative", "scripted:train_mix"])
    per_domain: int | dict[str, int] = 8
    action_weight: float = 1.0
    max_turns: int | None = None
    base_model: str = "models/base"
    lora: LoraSettings = field(default_factory=LoraSettings)
    eval_users: list[str] | None = None
    eval_seeds: int = 4
    eval_domains: list[str] | None = None
    generation: SamplingParams = SamplingParams(max_new_tokens=64, do_sample=False)
    output_dir: str = "models/agent/sft"
    checkpoint_dir: str = "checkpoints/agent_sft"
    seed_offset: int = 1

    TRL_CONFIG = "SFTConfig"
    TRAINER_DEFAULTS = {
        "max_length": 1792, "max_steps": -1, "num_train_epochs": 2.0, "learning_rate": 5.0e-4,
        "lr_scheduler_type": "cosine", "warmup_ratio": 0.0, "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1, "logging_steps": 2, "save_steps": 8, "save_total_limit": 2,
        "dataloader_num_workers": 0,
    }
    # loss on the agent's turns only, one transcript per row (never cut or packed), checkpoints by steps
    TRAINER_OWNED = ("assistant_only_loss", "packing", "save_strategy")

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> AgentSFTSettings:
        section = dict(section or {})
        lora = LoraSettings.from_section(section.pop("lora", None), "agent_sft.lora")
        generation = from_section(SamplingParams, section.pop("generation", None), "agent_sft.generation")
        return parse_settings(cls, section, "agent_sft", lora=lora, generation=generation)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _fits(
    examples: list[dict[str, Any]], tokenizer: Any, max_length: int
) -> tuple[list[dict[str, Any]], int]:
    kept = [
        e
        for e in examples
        if len(tokenizer.apply_chat_template(e["messages"], tokenize=True, return_dict=False)) <= max_length
    ]
    return kept, len(examples) - len(kept)


def train_agent_sft(settings: AgentSFTSettings, seed: int = 0) -> dict[str, Any]:
    """Clone, train, save the agent folder, evaluate; returns the stage metrics."""
    from datasets import Dataset
    from trl import SFTTrainer

    from mimesis_rl.agent.evaluate import evaluate
    from mimesis_rl.agent.users import UserFactory
    from mimesis_rl.models.loading import load_tokenizer
    from mimesis_rl.models.lora import peft_lora_config
    from mimesis_rl.rollout import ModelAgent, ModelRunner

    start = time.perf_counter()
    examples, report = clone_examples(
        settings.domains,
        settings.users,
        settings.per_domain,
        seed=settings.seed_offset + seed % 1000,
        max_turns=settings.max_turns,
    )
    tokenizer = load_tokenizer(settings.base_model)
    max_length = int(settings.option("max_length"))
    examples, too_long = _fits(examples, tokenizer, max_length)
    if too_long:
        log.warning("agent_sft: %d transcript(s) longer than max_length=%d left out", too_long, max_length)
    if not examples:
        raise ValueError(f"agent_sft: every transcript is longer than max_length={max_length}")
    longest = longest_turn_tokens(examples, tokenizer)
    data_seconds = time.perf_counter() - start
    checkpoint_dir, resume = checkpoint_folder(settings, seed, "")  # the data follow from settings + seed
    model = load_base_model(settings.base_model, precision_kwargs(settings.device, settings.bf16)["bf16"])
    config = trainer_config(settings, checkpoint_dir, seed, "agent_sft", assistant_only_loss=True,
                            packing=False, save_strategy="steps")
    rows = [{"messages": e["messages"]} for e in examples]
    trainer_cls, weighted = with_clean_param_groups(SFTTrainer), {}
    if settings.action_weight != 1.0:
        from mimesis_rl.training.span_weights import SPAN_COLUMN, span_weighted

        rows = [{**row, SPAN_COLUMN: action_span(row["messages"][-1]["content"]) or ""} for row in rows]
        trainer_cls, weighted = span_weighted(trainer_cls, config, tokenizer, settings.action_weight,
                                              "agent_sft: action_weight")
    trainer = trainer_cls(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_lora_config(settings.lora),
        callbacks=[MlflowMetricsCallback("agent_sft")],
        **weighted,
    )
    _, trained = train(trainer, resume)
    policy = trainer.model
    runner = ModelRunner(policy, tokenizer, settings.generation, adapter="default", seed=seed)
    users = {
        spec: UserFactory(
            spec,
            policy,
            tokenizer,
            # the project's user sampling, with no re-sample of an unusable turn (as this stage has had)
            replace(DEFAULT_SAMPLING, max_new_tokens=64, max_retries=0),
            seed=seed,
            base_model=settings.base_model,
        )
        for spec in (settings.eval_users or settings.users)
    }
    t0 = time.perf_counter()
    eval_seeds = [10**7 + i for i in range(settings.eval_seeds)]
    scores = evaluate(
        ModelAgent(runner, name="agent_sft"),
        users,
        settings.eval_domains or settings.domains or _all_domains(),
        eval_seeds,
        max_turns=settings.max_turns,
    )
    eval_seconds = time.perf_counter() - t0
    metrics: dict[str, Any] = {
        "examples": len(examples),
        "too_long": too_long,
        LONGEST_TURN: longest,
        "data": report.as_metrics(),
        "train_loss": trained["train_loss"],
        **first_last(trainer.state.log_history, "loss", "logged_loss"),
        "steps": trained["steps"],
        "resumed_from_step": trained["resumed_from_step"],
        "data_seconds": round(data_seconds, 2),
        "train_seconds": round(trained["train_seconds"], 2),
        "eval_seconds": round(eval_seconds, 2),
        "eval": scores,
    }
    if hasattr(trainer.data_collator, "found"):  # a SpanWeightCollator: final actions weighed, of those asked
        metrics.update({"action_spans.asked": trainer.data_collator.asked,
                        "action_spans.found": trainer.data_collator.found})
    finish(trainer, settings, checkpoint_dir, lambda: save_agent(
        policy,
        tokenizer,
        settings.output_dir,
        settings.base_model,
        settings.generation,
        "agent_sft",
        extra={
            "metrics": {k: v for k, v in metrics.items() if not isinstance(v, dict)},
            "users": list(settings.users),
            LONGEST_TURN: longest,  # agent_rl and agent_eval warn when their turn budget cuts it
        },
    ))
    return metrics


def _all_domains() -> list[str]:
    from mimesis_rl.envs.registry import DOMAINS

    return list(DOMAINS)


def run_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A worker's job: the payload `tasks.agent_sft` writes for `accelerate launch`."""
    settings = AgentSFTSettings.from_section(payload["settings"])
    return train_agent_sft(settings, seed=int(payload.get("seed", 0)))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    worker_main("mimesis_rl.agent.sft", run_payload)
