"""Simulator RL: TRL's `GRPOTrainer` on the SFT simulator's adapter, with fidelity rewards.

    python -m tasks.sim_rl                       # the stage (reads params.yaml `sim_rl`)

Steps: build prompts from several domains (corpus contexts + environment goal cards); fit the
realism discriminator on real turns vs the SFT simulator's own turns in the same contexts; train
the SFT LoRA adapter further with the weighted rewards; save a simulator folder. With `beta > 0`
the KL reference is the base model (TRL disables the adapter for it), not the SFT simulator.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.data.schema import Conversation
from mimesis_rl.models.artifact import ModelManifest, read_manifest, resolve_base, write_manifest
from mimesis_rl.models.inference.attention import use_grouped_attention
from mimesis_rl.simulator.discriminator import TurnDiscriminator
from mimesis_rl.simulator.format import format_spec, trim_messages
from mimesis_rl.simulator.rewards import build_rewards, slot_vocabulary
from mimesis_rl.simulator.rewards.fidelity import PatternPredictor
from mimesis_rl.simulator.rewards.slots import load_slots
from mimesis_rl.simulator.rl_data import build_prompts, length_range
from mimesis_rl.simulator.training import (
    DropEmptyParamGroups,
    MlflowMetricsCallback,
    build_settings,
    deepspeed_path,
    fingerprint,
    latest_checkpoint,
    precision_kwargs,
)

log = logging.getLogger(__name__)

DEFAULT_WEIGHTS = {"pattern_fidelity": 1.0, "realism": 1.0, "goal_consistency": 0.5, "paced_disclosure": 0.5,
                   "role_adherence": 1.0, "format": 0.5}


@dataclass(frozen=True)
class DiscriminatorSettings:
    """The realism reward's discriminator (`sim_rl.discriminator`).

    features: `cheap` (style + character n-grams) or `minilm` (style + MiniLM embeddings).
    samples: contexts the SFT simulator answers to make the "simulated" class.
    c: inverse regularisation of the logistic regression.
    """

    features: str = "cheap"
    samples: int = 96
    c: float = 1.0


@dataclass(frozen=True)
class RLSettings:
    """Simulator RL (`sim_rl:` in params.yaml).

    Inputs:
        sft_dir: the SFT simulator folder; train: conversations JSONL (contexts + references).
    Prompts:
        corpus_prompts_per_domain, env_prompts_per_domain, env_domains (null = all built-in).
    Rewards:
        rewards: weight per reward (0 leaves it out); labeler: the behaviour labeler for pattern
        fidelity (a `mimesis_rl.behavior` backend name); discriminator: see DiscriminatorSettings.
    GRPO:
        max_steps, learning_rate, batch_size (completions per device step), grad_accum,
        num_generations (group size), max_completion_length, max_prompt_tokens (older exchanges are
        dropped beyond it), temperature, top_p, beta, loss_type.
    Hardware / output: as in SFTSettings.
    """

    sft_dir: str = "models/simulator/sft"
    train: str = "data/processed/conversations/train.jsonl"
    limit_train: int | None = None
    corpus_prompts_per_domain: int = 64
    env_prompts_per_domain: int = 4
    env_domains: list[str] | None = None
    rewards: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    labeler: str = "rules"
    discriminator: DiscriminatorSettings = field(default_factory=DiscriminatorSettings)
    max_steps: int = 20
    learning_rate: float = 5e-5
    batch_size: int = 8
    grad_accum: int = 1
    num_generations: int = 4
    max_completion_length: int = 64
    max_prompt_tokens: int = 768
    temperature: float = 0.9
    top_p: float = 1.0
    beta: float = 0.0
    loss_type: str = "dapo"
    device: str = "auto"
    bf16: str | bool = "auto"
    deepspeed: str | None = None
    launcher: str = "python"
    accelerate_config: str | None = None
    output_dir: str = "models/simulator/rl"
    checkpoint_dir: str = "checkpoints/sim_rl"
    logging_steps: int = 1
    save_steps: int = 10
    save_total_limit: int = 2
    keep_checkpoints: bool = False

    def __post_init__(self) -> None:
        if self.batch_size % self.num_generations:
            raise ValueError(f"sim_rl.batch_size ({self.batch_size}) must be a multiple of num_generations "
                             f"({self.num_generations})")
        if self.launcher not in ("python", "accelerate"):
            raise ValueError(f"sim_rl.launcher: {self.launcher!r} is not `python` or `accelerate`")

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> RLSettings:
        section = dict(section or {})
        disc = build_settings(DiscriminatorSettings, section.pop("discriminator", None),
                              "sim_rl.discriminator")
        rewards = {**DEFAULT_WEIGHTS, **dict(section.pop("rewards", None) or {})}
        return build_settings(cls, section, "sim_rl", discriminator=disc, rewards=rewards)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pattern_predictor(name: str, params: Mapping[str, Any] | None = None) -> PatternPredictor:
    """The behaviour labeler `name` (built from params.yaml `label`) as a PatternPredictor."""
    from mimesis_rl.simulator.labeling import labeler_predictor

    return labeler_predictor(name, params)


def fit_discriminator(simulator: Any, rows: list[dict[str, Any]], settings: DiscriminatorSettings,
                      seed: int = 0) -> tuple[TurnDiscriminator, dict[str, float]]:
    """Real user turns vs the simulator's own turns in the same contexts (corpus rows only)."""
    corpus = [r for r in rows if r["source"] == "corpus"]
    if not corpus:
        raise ValueError("the realism discriminator needs corpus contexts with real user turns")
    rng = random.Random(seed)
    sample = rng.sample(corpus, min(settings.samples, len(corpus)))
    parsed = simulator.reply([r["prompt"] for r in sample], seed=seed)
    contexts, messages, labels = [], [], []
    for row, turn in zip(sample, parsed, strict=True):
        contexts.append(row["agent_message"])
        messages.append(row["real_message"])
        labels.append(1)
        if turn.ok:
            contexts.append(row["agent_message"])
            messages.append(turn.message)
            labels.append(0)
    if 0 not in labels:
        raise ValueError("the SFT simulator produced no parseable turn to train the discriminator on")
    disc = TurnDiscriminator(features=settings.features, c=settings.c, seed=seed)
    disc.fit(contexts, messages, labels)
    train_auc = disc.auc(contexts, messages, labels)
    return disc, {"discriminator.samples": float(len(labels)), "discriminator.train_auc": train_auc,
                  "discriminator.sft_parse_ok_rate": sum(t.ok for t in parsed) / max(len(parsed), 1)}


def _trainer_class() -> type:
    from trl import GRPOTrainer

    class SimulatorGRPOTrainer(DropEmptyParamGroups, GRPOTrainer):
        """TRL's GRPOTrainer; only the optimizer's empty parameter groups are dropped."""

    return SimulatorGRPOTrainer


def train_rl(settings: RLSettings, seed: int = 0, data_hash: str = "",
             extra_callbacks: list[Any] | None = None,
             label_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Fit the discriminator, run GRPO from the SFT adapter, save the RL simulator folder."""
    from datasets import Dataset
    from peft import PeftModel
    from transformers import AutoConfig, AutoModelForCausalLM
    from trl import GRPOConfig

    from mimesis_rl.models.loading import load_tokenizer
    from mimesis_rl.simulator.api import UserSimulator

    sft_dir = Path(settings.sft_dir)
    manifest = read_manifest(sft_dir)
    if manifest.kind != "lora":
        raise ValueError(f"{sft_dir}: RL continues a LoRA simulator, found kind {manifest.kind!r}")
    conversations: list[Conversation] = read_conversations(settings.train)
    if settings.limit_train:
        conversations = conversations[: settings.limit_train]
    rows = build_prompts(conversations, settings.corpus_prompts_per_domain, settings.env_prompts_per_domain,
                         settings.env_domains, seed, manifest.max_behaviours)
    metrics: dict[str, Any] = {"prompts": len(rows),
                               "prompts_corpus": sum(r["source"] == "corpus" for r in rows),
                               "prompt_domains": len({r["domain"] for r in rows})}

    base_dir = resolve_base(sft_dir, manifest)
    tokenizer = load_tokenizer(sft_dir / "tokenizer" if (sft_dir / "tokenizer").is_dir() else base_dir,
                               padding_side="left")
    positions = int(getattr(AutoConfig.from_pretrained(base_dir), "max_position_embeddings", 0) or 10**9)
    limit = min(settings.max_prompt_tokens, positions - settings.max_completion_length)

    def count(messages: list[dict[str, str]]) -> int:
        return len(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True))

    for row in rows:  # TRL's GRPO no longer truncates prompts: keep the recent dialogue in the window
        row["prompt"] = trim_messages(row["prompt"], count, limit)

    precision = precision_kwargs(settings.device, settings.bf16)
    bf16_base = precision["bf16"] and not settings.deepspeed  # PEFT keeps the adapter itself in fp32
    discriminator = None
    rewards = dict(settings.rewards)
    if rewards.get("realism", 0.0):
        # The "simulated" class: the SFT simulator's turns, as long as GRPO's completions may be.
        sampling = replace(manifest.sampling, max_new_tokens=settings.max_completion_length)
        sft_sim = UserSimulator.load(sft_dir, device=settings.device, dtype="bfloat16" if bf16_base else None,
                                     sampling=sampling)
        try:
            discriminator, disc_metrics = fit_discriminator(sft_sim, rows, settings.discriminator, seed)
            metrics.update(disc_metrics)
        except ValueError as exc:  # an SFT simulator that never holds the format (tiny test models)
            log.warning("realism reward left out: %s", exc)
            rewards["realism"] = 0.0
            metrics["discriminator.skipped"] = 1.0
        del sft_sim
    predictor = (pattern_predictor(settings.labeler, label_params)
                 if settings.rewards.get("pattern_fidelity", 0.0) else None)
    vocabulary = slot_vocabulary(load_slots(r["goal_slots"]) for r in rows)
    funcs, weights = build_rewards(rewards, predictor=predictor, discriminator=discriminator,
                                   vocabulary=vocabulary, length_range=length_range(conversations))

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype="bfloat16" if bf16_base else "float32")
    use_grouped_attention(base)  # GRPO generates padded batches: keep the KV heads grouped (same numbers)
    model = PeftModel.from_pretrained(base, str(sft_dir / "adapter"), is_trainable=True)
    run_key = fingerprint(settings.to_json(), seed, data_hash)
    checkpoint_dir = Path(settings.checkpoint_dir) / run_key
    resume = latest_checkpoint(checkpoint_dir)
    config = GRPOConfig(
        output_dir=str(checkpoint_dir),
        max_steps=settings.max_steps,
        learning_rate=settings.learning_rate,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accum,
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_length,
        temperature=settings.temperature,
        top_p=settings.top_p,
        beta=settings.beta,
        loss_type=settings.loss_type,
        reward_weights=weights,
        logging_steps=settings.logging_steps,
        save_strategy="steps",
        save_steps=settings.save_steps,
        save_total_limit=settings.save_total_limit,
        deepspeed=deepspeed_path(settings.deepspeed),
        report_to="none",
        seed=seed,
        data_seed=seed,
        gradient_checkpointing=False,
        **precision,
    )
    trainer = _trainer_class()(
        model=model, reward_funcs=funcs, args=config, train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer, callbacks=[MlflowMetricsCallback("rl"), *(extra_callbacks or [])])
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - start
    history = trainer.state.log_history
    rewards = [e["reward"] for e in history if e.get("reward") is not None]
    metrics.update({
        "steps": int(trainer.state.global_step),
        "train_seconds": seconds,
        "train_loss": float(result.training_loss),
        "first_reward": float(rewards[0]) if rewards else None,
        "last_reward": float(rewards[-1]) if rewards else None,
        "resumed_from_step": int(resume.rsplit("-", 1)[-1]) if resume else 0,
    })
    for name in [f.__name__ for f in funcs]:
        values = [e[f"rewards/{name}/mean"] for e in history if e.get(f"rewards/{name}/mean") is not None]
        if values:
            metrics[f"reward.{name}.first"] = float(values[0])
            metrics[f"reward.{name}.last"] = float(values[-1])
    if trainer.is_world_process_zero():
        _save(trainer, settings, manifest, base_dir, discriminator, data_hash, metrics)
        if not settings.keep_checkpoints:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return metrics


def _save(trainer: Any, settings: RLSettings, sft_manifest: ModelManifest, base_dir: Path,
          discriminator: TurnDiscriminator | None, data_hash: str, metrics: dict[str, Any]) -> Path:
    from mimesis_rl.models.artifact import base_reference, publish, staging_dir

    output_dir = staging_dir(settings.output_dir)
    trainer.save_model(str(output_dir / "adapter"))
    for stray in ("training_args.bin", "README.md"):
        (output_dir / "adapter" / stray).unlink(missing_ok=True)
    trainer.processing_class.save_pretrained(str(output_dir / "tokenizer"))
    if discriminator is not None:
        discriminator.save(output_dir / "discriminator.joblib")
    manifest = ModelManifest(
        kind="lora", base=base_reference(base_dir), generation=sft_manifest.generation, format=format_spec(),
        max_behaviours=sft_manifest.max_behaviours, behaviours=sft_manifest.behaviours,
        extra={"stage": "sim_rl", "parent_simulator": str(settings.sft_dir), "data_hash": data_hash,
               "rewards": settings.rewards, "metrics": {k: v for k, v in metrics.items() if v is not None}})
    write_manifest(output_dir, manifest)
    return publish(output_dir, settings.output_dir)


def main(argv: list[str] | None = None) -> None:
    """Worker entry for `accelerate launch -m mimesis_rl.simulator.rl CONFIG.json [RESULT.json]`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit("usage: python -m mimesis_rl.simulator.rl CONFIG.json [RESULT.json]")
    payload = json.loads(Path(args[0]).read_text())
    metrics = train_rl(RLSettings.from_section(payload["settings"]), seed=int(payload.get("seed", 0)),
                       data_hash=payload.get("data_hash", ""), label_params=payload.get("label_params"))
    if len(args) > 1:
        from mimesis_rl.fsutil import write_json

        write_json(args[1], metrics)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
