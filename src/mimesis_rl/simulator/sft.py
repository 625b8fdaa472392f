"""Simulator SFT: learn `<think>reasoning</think>message` for every real user turn, given the system
card and the role-flipped dialogue, with TRL's `SFTTrainer` (loss on the simulator's turns only).

    python -m tasks.sim_sft                      # the stage (reads params.yaml `sim_sft`)
    accelerate launch --config_file infra/accelerate/multi_gpu.yaml -m mimesis_rl.simulator.sft CONFIG.json

LoRA over the shared base by default (`method: full` trains every weight); DeepSpeed ZeRO through
`deepspeed: infra/deepspeed/zero2.json`. Interrupted runs resume from the newest checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.data.schema import Conversation
from mimesis_rl.models.artifact import (
    DEFAULT_SAMPLING,
    ModelManifest,
    base_reference,
    publish,
    staging_dir,
    write_manifest,
)
from mimesis_rl.models.config import LoraSettings
from mimesis_rl.models.inference.generation import SamplingParams
from mimesis_rl.simulator.format import format_spec, sft_examples
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
METHODS = ("lora", "full")


@dataclass(frozen=True)
class SFTSettings:
    """Simulator SFT (`sim_sft:` in params.yaml).

    Data:
        train, val: conversations JSONL with patterns and reasoning on user turns.
        limit_train: cap on training conversations; limit_val: on validation conversations and on
            the validation examples (windows) scored at the end (null = all).
        max_behaviours: behaviour patterns the system card names.
        window_turns: long conversations become windows of about this many turns, each under the
            system card (null = one example per conversation, cut at max_length). With max_steps
            set, the windows are shuffled (seeded) and only those the schedule reaches are tokenized.
    Model:
        base_model: the shared base folder (base_model stage).
        method: `lora` (adapter over the frozen base) or `full`.
        lora: rank/alpha/dropout/target modules of the adapter.
    Training:
        max_steps (-1 = use num_train_epochs), num_train_epochs, learning_rate, lr_scheduler_type,
        warmup_ratio, weight_decay, batch_size, grad_accum, max_length (tokens per conversation),
        gradient_checkpointing (off for small models: it costs time and saves little).
    Hardware:
        device (auto | cpu | cuda), bf16 (auto | true | false), deepspeed (a JSON under
        infra/deepspeed or null), launcher (`python`: in process; `accelerate`: `accelerate launch`
        with accelerate_config), dataloader_workers.
    Output:
        output_dir (the simulator folder, a DVC output), checkpoint_dir (outside DVC; resumable),
        logging_steps, save_steps, save_total_limit, eval_steps, keep_checkpoints.
    """

    train: str = "data/processed/conversations/train.jsonl"
    val: str | None = "data/processed/conversations/val.jsonl"
    limit_train: int | None = None
    limit_val: int | None = 64
    max_behaviours: int = 4
    window_turns: int | None = 8
    base_model: str = "models/base"
    method: str = "lora"
    lora: LoraSettings = field(default_factory=LoraSettings)
    max_steps: int = -1
    num_train_epochs: float = 1.0
    learning_rate: float = 2e-4
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.05
    weight_decay: float = 0.0
    batch_size: int = 4
    grad_accum: int = 1
    max_length: int = 768
    gradient_checkpointing: bool = False
    device: str = "auto"
    bf16: str | bool = "auto"
    deepspeed: str | None = None
    launcher: str = "python"
    accelerate_config: str | None = None
    dataloader_workers: int = 0
    output_dir: str = "models/simulator/sft"
    checkpoint_dir: str = "checkpoints/sim_sft"
    logging_steps: int = 5
    save_steps: int = 50
    save_total_limit: int = 2
    eval_steps: int | None = None
    keep_checkpoints: bool = False
    generation: SamplingParams = DEFAULT_SAMPLING

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"sim_sft.method: {self.method!r} is not one of {METHODS}")
        if self.launcher not in ("python", "accelerate"):
            raise ValueError(f"sim_sft.launcher: {self.launcher!r} is not `python` or `accelerate`")

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> SFTSettings:
        section = dict(section or {})
        lora = LoraSettings.from_section(section.pop("lora", None), "sim_sft.lora")
        generation = build_settings(SamplingParams, section.pop("generation", None), "sim_sft.generation")
        return build_settings(cls, section, "sim_sft", lora=lora, generation=generation)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _trainer_class() -> type:
    from trl import SFTTrainer

    class SimulatorSFTTrainer(DropEmptyParamGroups, SFTTrainer):
        """TRL's SFTTrainer; only the optimizer's empty parameter groups are dropped."""

    return SimulatorSFTTrainer


def _read(path: str | None, limit: int | None) -> list[Conversation]:
    if not path:
        return []
    conversations = read_conversations(path)
    return conversations[:limit] if limit else conversations


def scheduled(examples: list[dict[str, Any]], settings: SFTSettings, seed: int = 0) -> list[dict[str, Any]]:
    """With `max_steps` set, the examples those steps reach (shuffled with the seed) and no more, so
    a short run does not tokenize a whole corpus; otherwise all of them."""
    if settings.max_steps <= 0:
        return examples
    world = int(os.environ.get("WORLD_SIZE", "1"))
    needed = settings.max_steps * settings.batch_size * settings.grad_accum * world
    if needed >= len(examples):
        return examples
    picked = random.Random(seed).sample(examples, needed)
    log.info("sim_sft: %d of %d training examples fit max_steps=%d", needed, len(examples),
             settings.max_steps)
    return picked


def build_trainer(settings: SFTSettings, train: list[Conversation], val: list[Conversation],
                  checkpoint_dir: str | Path, seed: int = 0, extra_callbacks: list[Any] | None = None) -> Any:
    """An `SFTTrainer` over the conversations (exposed so tests and benchmarks can inspect it)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig

    from mimesis_rl.models.loading import load_tokenizer
    from mimesis_rl.models.lora import peft_lora_config

    train_examples = sft_examples(train, settings.max_behaviours, settings.window_turns)
    if not train_examples:
        raise ValueError(f"{settings.train}: no conversation with a user turn to learn from")
    train_examples = scheduled(train_examples, settings, seed)
    val_examples = sft_examples(val, settings.max_behaviours, settings.window_turns)
    if settings.limit_val and len(val_examples) > settings.limit_val:  # windows outnumber conversations
        val_examples = random.Random(seed).sample(val_examples, settings.limit_val)
    tokenizer = load_tokenizer(settings.base_model)
    precision = precision_kwargs(settings.device, settings.bf16)
    # bf16 base weights under a LoRA adapter (PEFT keeps the adapter in fp32): the fast CPU path
    # benchmarks/precision.py measured; full fine-tuning keeps fp32 master weights.
    bf16_base = precision["bf16"] and settings.method == "lora" and not settings.deepspeed
    dtype = "bfloat16" if bf16_base else "float32"
    model = AutoModelForCausalLM.from_pretrained(settings.base_model, dtype=dtype)
    config = SFTConfig(
        output_dir=str(checkpoint_dir),
        assistant_only_loss=True,
        max_length=settings.max_length,
        packing=False,
        max_steps=settings.max_steps,
        num_train_epochs=settings.num_train_epochs,
        learning_rate=settings.learning_rate,
        lr_scheduler_type=settings.lr_scheduler_type,
        warmup_ratio=settings.warmup_ratio,
        weight_decay=settings.weight_decay,
        per_device_train_batch_size=settings.batch_size,
        per_device_eval_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accum,
        gradient_checkpointing=settings.gradient_checkpointing,
        logging_steps=settings.logging_steps,
        save_strategy="steps",
        save_steps=settings.save_steps,
        save_total_limit=settings.save_total_limit,
        eval_strategy="steps" if val_examples and settings.eval_steps else "no",
        eval_steps=settings.eval_steps,
        deepspeed=deepspeed_path(settings.deepspeed),
        dataloader_num_workers=settings.dataloader_workers,
        report_to="none",
        disable_tqdm=False,
        seed=seed,
        data_seed=seed,
        **precision,
    )
    return _trainer_class()(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(train_examples),
        eval_dataset=Dataset.from_list(val_examples) if val_examples else None,
        processing_class=tokenizer,
        peft_config=peft_lora_config(settings.lora) if settings.method == "lora" else None,
        callbacks=[MlflowMetricsCallback("sft"), *(extra_callbacks or [])],
    )


def save_simulator(trainer: Any, settings: SFTSettings, output_dir: str | Path, stage: str,
                   extra: dict[str, Any] | None = None) -> Path:
    """Write the simulator folder: adapter (or full model), tokenizer, manifest."""
    staged = staging_dir(output_dir)
    weights = staged / ("adapter" if settings.method == "lora" else "model")
    trainer.save_model(str(weights))
    for stray in ("training_args.bin", "README.md"):
        (weights / stray).unlink(missing_ok=True)
    trainer.processing_class.save_pretrained(str(staged / "tokenizer"))
    manifest = ModelManifest(kind=settings.method, base=base_reference(settings.base_model),
                             format=format_spec(),
                                 generation=asdict(settings.generation),
                                 max_behaviours=settings.max_behaviours,
                                 extra={"stage": stage, **(extra or {})})
    write_manifest(staged, manifest)
    return publish(staged, output_dir)


def train_sft(settings: SFTSettings, seed: int = 0, data_hash: str = "") -> dict[str, Any]:
    """Train (resuming when a checkpoint of the same settings and data exists) and save the simulator."""
    train = _read(settings.train, settings.limit_train)
    val = _read(settings.val, settings.limit_val)
    run_key = fingerprint(settings.to_json(), seed, data_hash)
    checkpoint_dir = Path(settings.checkpoint_dir) / run_key
    resume = latest_checkpoint(checkpoint_dir)
    if resume:
        log.info("resuming simulator SFT from %s", resume)
    trainer = build_trainer(settings, train, val, checkpoint_dir, seed)
    n_trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - start
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    metrics: dict[str, Any] = {
        "train_loss": float(result.training_loss),
        "first_logged_loss": float(losses[0]) if losses else None,
        "last_logged_loss": float(losses[-1]) if losses else None,
        "steps": int(trainer.state.global_step),
        "train_seconds": seconds,
        "train_conversations": len(train),
        "train_examples": len(trainer.train_dataset),
        "trainable_params": int(n_trainable),
        "resumed_from_step": int(resume.rsplit("-", 1)[-1]) if resume else 0,
    }
    tokens = [e.get("num_tokens") for e in trainer.state.log_history if e.get("num_tokens")]
    if tokens and seconds > 0:
        metrics["train_tokens"] = int(tokens[-1])
        metrics["tokens_per_second"] = float(tokens[-1]) / seconds
    if trainer.eval_dataset is not None:
        metrics["eval_loss"] = float(trainer.evaluate()["eval_loss"])
    if trainer.is_world_process_zero():
        logged = {k: v for k, v in metrics.items() if v is not None}
        save_simulator(trainer, settings, settings.output_dir, "sim_sft",
                       {"data_hash": data_hash, "metrics": logged})
        if not settings.keep_checkpoints:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return metrics


def main(argv: list[str] | None = None) -> None:
    """Worker entry for `accelerate launch -m mimesis_rl.simulator.sft CONFIG.json [RESULT.json]`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit("usage: python -m mimesis_rl.simulator.sft CONFIG.json [RESULT.json]")
    payload = json.loads(Path(args[0]).read_text())
    settings = SFTSettings.from_section(payload["settings"])
    metrics = train_sft(settings, seed=int(payload.get("seed", 0)), data_hash=payload.get("data_hash", ""))
    if len(args) > 1:
        from mimesis_rl.fsutil import write_json

        write_json(args[1], metrics)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
