"""Simulator SFT: learn `<think>reasoning</think>message` for every real user turn, given the system
card and the role-flipped dialogue, with TRL's `SFTTrainer` (loss on the simulator's turns only).

    python -m tasks.sim_sft                      # the stage (reads params.yaml `sim_sft`)
    accelerate launch --config_file infra/accelerate/multi_gpu.yaml -m mimesis_rl.simulator.sft PAYLOAD.json

The training windows are a mix: corpus windows (how people talk, with the windows that end a
conversation oversampled to `end_share`, so leaving is learned) and, at `env_share`, windows of
environment dialogues played by scripted agents and training-role scripted users on seeded goal
cards (`simulator.env_data`: how a user acts on a goal card). LoRA over the shared base by default
(`method: full` trains every weight); DeepSpeed ZeRO through `deepspeed: infra/deepspeed/zero2.json`.
Interrupted runs resume from the newest checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.data.schema import Conversation
from mimesis_rl.fsutil import write_json
from mimesis_rl.models.artifact import DEFAULT_SAMPLING, ModelManifest, base_reference, read_manifest
from mimesis_rl.models.config import LoraSettings
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.settings import from_section
from mimesis_rl.simulator.artifact import DECIDE_BY_REASONING, save_simulator
from mimesis_rl.simulator.curve import CurveSettings, curve_callback
from mimesis_rl.simulator.decision_windows import cycled, with_act_first, with_verdict_spans
from mimesis_rl.simulator.env_data import EnvDialogues, env_windows, play_dialogues
from mimesis_rl.simulator.format import END_MARKER, format_spec
from mimesis_rl.simulator.leaving import FILE as LEAVE_FILE
from mimesis_rl.simulator.leaving import LeaveSettings, fit_leave_model, leave_info
from mimesis_rl.simulator.onpolicy import (
    LAST_TURN_COLUMN,
    kept_whole,
    mixed_pool,
    onpolicy_windows,
    relabel_simulator,
)
from mimesis_rl.simulator.sft_data import TokenCounter, fit_windows, sft_examples
from mimesis_rl.training.checkpoints import checkpoint_folder, fingerprint, finish, run_identity, train
from mimesis_rl.training.config import (
    TrainingSettings,
    parse_settings,
    precision_kwargs,
    trainer_config,
)
from mimesis_rl.training.launch import worker_main
from mimesis_rl.training.policy import load_base_model, load_trainable_adapter, load_trainable_model
from mimesis_rl.training.trainers import (
    MlflowMetricsCallback,
    first_last,
    logged_metrics,
    with_clean_param_groups,
)

log = logging.getLogger(__name__)
PHASE_RECORD = "phase.json"  # beside a finished phase's model: its settings' key and its metrics
METHODS = ("lora", "full")
# what one phase of `sim_sft.phases` may change (params.schema.SimSFTPhase): its data and its trainer; the
# model, where the stage writes, the curve and the leave model belong to the whole stage
PHASE_KEYS = {"name", "trainer", "env", "limit_train", "window_turns", "end_share", "max_behaviours"}
SPAN_COLUMN = "weighted_span"  # `training.span_weights.SPAN_COLUMN` (that module imports TRL)


@dataclass(frozen=True)
class SFTSettings(TrainingSettings):
    """Simulator SFT (`sim_sft:` in params.yaml).

    Data:
        train, val: conversations JSONL with patterns and reasoning on user turns.
        limit_train: cap on training conversations; limit_val: on validation conversations and on
            the validation examples (windows) scored at the end (null = all).
        max_behaviours: behaviour patterns the system card names.
        window_turns: long conversations become windows of about this many turns, each under the
            system card (null = one example per conversation, cut at max_length). With max_steps
            set, only the windows the schedule reaches are tokenized.
        end_share: share of the corpus windows that end the conversation (the user leaves), drawn
            with repetition when there are fewer (null = as they come).
        env: environment dialogues (see `EnvDialogues`): `share` of all training windows.
        leave: the learned leave model fitted beside the LM (`simulator.leaving.LeaveSettings`).
    Model:
        base_model: the shared base folder (base_model stage); method: `lora` or `full`; lora:
        rank/alpha/dropout/target modules of the adapter.
        warm_start: a saved simulator folder of the same method (e.g. models/simulator/sft) whose
            adapter (or, `full`, whole model) this run trains on, instead of a fresh one (a LoRA's own
            `lora` settings then hold); null = fresh. Why: a scheduled retrain, or a second data mix,
            keeps what the first one learned.
        decide_by_reasoning: the simulator's decision on a pending proposal is the verdict its own
            reasoning states where its message says neither yes nor no (`verdicts.reasoned_decision`;
            with `env.verdict_first`, the act its reasoning opens with). Recorded in the manifest, so
            every runtime that loads the folder (sim_eval, agent training and evaluation, the service)
            reads its decisions the same way. Why: a 135M simulator learns the card's decision in its
            reasoning before its message says it (README "Evidence").
        phases: a curriculum run before these settings, in order, on one adapter (or one full model):
            each entry names a phase (`name`) and overrides sim_sft keys for it (`env`, `trainer`,
            `window_turns`, ...); each phase continues the previous one's weights and the settings
            above continue the last (see `phase_settings`). Why: the card's verdict is learned on
            dense decision items first, then used inside whole dialogues in every domain
            (benchmarks.sim_routes).
    Training: `trainer:` holds TRL `SFTConfig` options as they are (see SFTSettings.TRAINER_DEFAULTS);
        hardware and output: see TrainingSettings. generation: the simulator's decoding settings.
    """

    train: str = "data/processed/conversations/train.jsonl"
    val: str | None = "data/processed/conversations/val.jsonl"
    limit_train: int | None = None
    limit_val: int | None = 64
    max_behaviours: int = 4
    window_turns: int | None = 8
    end_share: float | None = None
    env: EnvDialogues = field(default_factory=EnvDialogues)
    leave: LeaveSettings = field(default_factory=LeaveSettings)
    base_model: str = "models/base"
    method: str = "lora"
    lora: LoraSettings = field(default_factory=LoraSettings)
    warm_start: str | None = None
    decide_by_reasoning: bool = False
    phases: list[dict[str, Any]] = field(default_factory=list)
    output_dir: str = "models/simulator/sft"
    checkpoint_dir: str = "checkpoints/sim_sft"
    generation: SamplingParams = DEFAULT_SAMPLING
    curve: CurveSettings = field(default_factory=CurveSettings)

    TRL_CONFIG = "SFTConfig"
    # SFTConfig options unless params.yaml says otherwise (gradient checkpointing off: on small models
    # it costs time and saves little).
    TRAINER_DEFAULTS = {
        "max_steps": -1, "num_train_epochs": 1.0, "learning_rate": 2e-4, "lr_scheduler_type": "cosine",
        "warmup_ratio": 0.05, "weight_decay": 0.0, "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1, "max_length": 768, "gradient_checkpointing": False,
        "logging_steps": 5, "save_steps": 50, "save_total_limit": 2, "dataloader_num_workers": 0,
        "disable_tqdm": False,
    }
    # loss on the simulator's turns only; checkpoints by steps; evaluation follows `eval_steps`
    TRAINER_OWNED = ("assistant_only_loss", "save_strategy", "eval_strategy", "per_device_eval_batch_size")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method not in METHODS:
            raise ValueError(f"sim_sft.method: {self.method!r} is not one of {METHODS}")
        if self.end_share is not None and not 0.0 <= self.end_share < 1.0:
            raise ValueError(f"sim_sft.end_share must be in [0, 1), got {self.end_share}")
        names = [phase.get("name") for phase in self.phases]
        if not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
            raise ValueError(f"sim_sft.phases: every phase needs a name of its own, got {names}")
        for phase in self.phases:
            fixed = sorted(set(phase) - PHASE_KEYS)
            if fixed:
                raise ValueError(f"sim_sft.phases[{phase['name']}]: {fixed} belong to the whole stage, "
                                 "not to one phase")

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> SFTSettings:
        section = dict(section or {})
        lora = LoraSettings.from_section(section.pop("lora", None), "sim_sft.lora")
        generation = from_section(SamplingParams, section.pop("generation", None), "sim_sft.generation")
        env = from_section(EnvDialogues, section.pop("env", None), "sim_sft.env")
        leave = from_section(LeaveSettings, section.pop("leave", None), "sim_sft.leave")
        curve = from_section(CurveSettings, section.pop("curve", None), "sim_sft.curve")
        return parse_settings(cls, section, "sim_sft", lora=lora, generation=generation, env=env, leave=leave,
                              curve=curve)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _read(path: str | None, limit: int | None) -> list[Conversation]:
    if not path:
        return []
    conversations = read_conversations(path)
    return conversations[:limit] if limit else conversations


def ends_conversation(example: dict[str, Any]) -> bool:
    """Does the window's last simulator turn leave the conversation?"""
    return example["messages"][-1]["content"].rstrip().endswith(END_MARKER)


def scheduled(examples: list[dict[str, Any]], settings: SFTSettings, seed: int = 0,
              env_examples: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The training windows, in training order: with `max_steps` set, as many as those steps reach
    (so a short run does not tokenize a whole corpus), else every corpus window once. `env.share` of
    them are environment windows and `end_share` of the corpus part end the conversation (both drawn
    with repetition when there are fewer)."""
    env_examples = list(env_examples or [])
    share = settings.env.share if env_examples else 0.0
    if settings.option("max_steps", -1) > 0:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        total = (settings.option("max_steps") * settings.option("per_device_train_batch_size", 8)
                 * settings.option("gradient_accumulation_steps", 1) * world)
    else:
        total = round(len(examples) / (1.0 - share))
    n_env = round(share * total) if env_examples else 0
    n_corpus = total - n_env
    rng = random.Random(seed)
    if settings.end_share is None:
        if not n_env and n_corpus >= len(examples):
            return examples  # all of them, in order (the trainer shuffles and cycles)
        corpus = cycled(examples, min(n_corpus, len(examples)), rng)
    else:
        ending = [e for e in examples if ends_conversation(e)]
        other = [e for e in examples if not ends_conversation(e)]
        n_end = round(settings.end_share * n_corpus) if ending else 0
        corpus = cycled(ending, n_end, rng) + cycled(other, n_corpus - n_end, rng)
    picked = corpus + cycled(env_examples, n_env, rng)
    rng.shuffle(picked)
    log.info("sim_sft: %d training windows (%d environment, %d corpus of %d, %d ending the conversation)",
             len(picked), n_env, len(corpus), len(examples), sum(ends_conversation(e) for e in picked))
    return picked


def environment_dialogues(settings: SFTSettings, seed: int = 0) -> list[Conversation]:
    """The scripted environment dialogues the SFT mixes in (none when `env.share` is 0)."""
    return play_dialogues(settings.env, seed) if settings.env.share > 0 else []


def onpolicy_decisions(settings: SFTSettings, checkpoint_dir: str | Path,
                       seed: int = 0) -> list[Conversation]:
    """The warm start's own dialogues, relabelled at its decisions (`env.onpolicy_dialogues`; none when
    0), kept beside the run's checkpoints so a resumed run trains on the same ones."""
    if not settings.env.onpolicy_dialogues:
        return []
    if not settings.warm_start:
        raise ValueError("sim_sft.env.onpolicy_dialogues replays the simulator this run continues; "
                         "set sim_sft.warm_start (or train a phase before)")
    balanced = settings.env.onpolicy_balanced
    cache = Path(checkpoint_dir) / ("onpolicy-balanced.jsonl" if balanced else "onpolicy.jsonl")
    return relabel_simulator(settings.warm_start, settings.env.onpolicy_dialogues, settings.env.domains, seed,
                             settings.base_model, settings.device, cache, balanced)


def training_windows(settings: SFTSettings, train: list[Conversation], seed: int = 0,
                     env_dialogues: list[Conversation] | None = None,
                     count_tokens: TokenCounter | None = None,
                     onpolicy: list[Conversation] | None = None) -> list[dict[str, Any]]:
    """Corpus windows + environment windows, mixed and ordered by `scheduled`, then each fitted to
    `max_length` when `count_tokens` is given (`sft_data.fit_windows`; the trainer shuffles). With
    `env.verdict_weight` set, every window carries the verdict span its loss weighs up ("" = none).
    `onpolicy` (relabelled decisions, `simulator.onpolicy`) are `env.onpolicy_share` of the environment
    windows, each training its last reply alone (every row then carries that flag)."""
    limit = settings.option("max_length") if count_tokens is not None else None
    corpus = sft_examples(train, settings.max_behaviours, settings.window_turns)
    if not corpus:
        raise ValueError(f"{settings.train}: no conversation with a user turn to learn from")
    dialogues = environment_dialogues(settings, seed) if env_dialogues is None else env_dialogues
    onpolicy = onpolicy or []
    if settings.env.verdict_first:
        dialogues, onpolicy = with_act_first(dialogues), with_act_first(onpolicy)
    env = env_windows(dialogues, settings.max_behaviours, settings.window_turns, seed,
                      settings.env.decision_share, settings.env.decision_focus) if dialogues else []
    if onpolicy:
        mine = onpolicy_windows(onpolicy, settings.max_behaviours, settings.window_turns, seed)
        env = mixed_pool(env, mine, settings.env.onpolicy_share, seed)
    picked = scheduled(corpus, settings, seed, env)
    fitted = fit_windows(picked, count_tokens, limit)  # after the draw: only the windows trained are counted
    if len(fitted) > len(picked):
        log.info("sim_sft: fitting to %d tokens made %d windows of %d", limit, len(fitted), len(picked))
    if onpolicy:
        fitted = [{LAST_TURN_COLUMN: False, **w} for w in kept_whole(fitted, onpolicy)]
        log.info("sim_sft: %d windows end on a relabelled on-policy decision",
                 sum(w[LAST_TURN_COLUMN] for w in fitted))
    if settings.env.verdict_weight != 1.0 and (dialogues or onpolicy):
        fitted = with_verdict_spans(fitted, [*dialogues, *onpolicy], SPAN_COLUMN, settings.env.verdict_span)
        log.info("sim_sft: %d windows end on a proposal's verdict, weighted x%g",
                 sum(bool(w[SPAN_COLUMN]) for w in fitted), settings.env.verdict_weight)
    return fitted


def token_counter(tokenizer: Any) -> TokenCounter:
    """Tokens of a chat as the trainer tokenizes it."""
    from mimesis_rl.models.inference.chat import template_ids

    return lambda messages: len(template_ids(tokenizer, messages, generation_prompt=False))


def build_trainer(settings: SFTSettings, train: list[Conversation], val: list[Conversation],
                  checkpoint_dir: str | Path, seed: int = 0, extra_callbacks: list[Any] | None = None,
                  env_dialogues: list[Conversation] | None = None, prefix: str = "sft",
                  onpolicy: list[Conversation] | None = None) -> Any:
    """An `SFTTrainer` over the conversations (exposed so tests and benchmarks can inspect it); its
    numbers go to MLflow as `<prefix>.<name>`."""
    from datasets import Dataset
    from trl import SFTTrainer

    from mimesis_rl.models.loading import load_tokenizer
    from mimesis_rl.models.lora import peft_lora_config

    tokenizer = load_tokenizer(settings.base_model)
    count_tokens = token_counter(tokenizer)
    train_examples = training_windows(settings, train, seed, env_dialogues, count_tokens, onpolicy)
    val_examples = sft_examples(val, settings.max_behaviours, settings.window_turns)
    val_examples = fit_windows(val_examples, count_tokens, settings.option("max_length"))
    if settings.limit_val and len(val_examples) > settings.limit_val:  # windows outnumber conversations
        val_examples = random.Random(seed).sample(val_examples, settings.limit_val)
    # bf16 base weights under a LoRA adapter (PEFT keeps the adapter in fp32): the fast CPU path
    # benchmarks/precision.py measured; full fine-tuning keeps fp32 master weights.
    bf16 = precision_kwargs(settings.device, settings.bf16)["bf16"]
    bf16_base = bf16 and settings.method == "lora" and not settings.deepspeed
    if settings.warm_start:
        model = warm_model(settings, bf16_base)
    else:
        model = load_base_model(settings.base_model, bf16_base)
    fresh_lora = settings.method == "lora" and not settings.warm_start
    evaluate = bool(val_examples and settings.option("eval_steps"))
    # packing (TRL's `packing: true, packing_strategy: bfd`, padding-free) may be chosen in params.yaml;
    # the packed-sequence mask keeps each example to itself (tested), so only the padding is saved.
    config = trainer_config(settings, checkpoint_dir, seed, "sim_sft", assistant_only_loss=True,
                            save_strategy="steps", eval_strategy="steps" if evaluate else "no",
                            per_device_eval_batch_size=settings.option("per_device_train_batch_size"))
    trainer_cls, weighted = with_clean_param_groups(SFTTrainer), {}
    if any(example.get(SPAN_COLUMN) or example.get(LAST_TURN_COLUMN) for example in train_examples):
        from mimesis_rl.training.span_weights import span_weighted

        trainer_cls, weighted = span_weighted(trainer_cls, config, tokenizer, settings.env.verdict_weight,
                                              "sim_sft: env.verdict_weight and env.onpolicy_dialogues")
    return trainer_cls(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(train_examples),
        eval_dataset=Dataset.from_list(val_examples) if val_examples else None,
        processing_class=tokenizer,
        peft_config=peft_lora_config(settings.lora) if fresh_lora else None,
        callbacks=[MlflowMetricsCallback(prefix), *(extra_callbacks or [])],
        **weighted,
    )


def warm_model(settings: SFTSettings, bf16: bool) -> Any:
    """`warm_start`'s weights, trainable: the base with its adapter (`method: lora`) or its whole model
    (`method: full`, fp32 master weights). It must be of this run's method and grown from this run's base."""
    folder = Path(settings.warm_start or "")
    manifest = read_manifest(folder)
    weights = folder / ("adapter" if settings.method == "lora" else "model")
    if manifest.kind != settings.method or not weights.is_dir():
        raise ValueError(f"sim_sft.warm_start: {folder} is not a saved simulator of method "
                         f"{settings.method!r} (kind {manifest.kind!r})")
    ours = base_reference(settings.base_model)["manifest"]
    if (manifest.base.get("manifest") or {}) != ours:
        raise ValueError(f"sim_sft.warm_start: {folder} was trained on another base "
                         f"({manifest.base.get('path')}) than {settings.base_model}")
    if settings.method == "full":
        return load_trainable_model(weights)
    return load_trainable_adapter(settings.base_model, weights, bf16)


def manifest_for(settings: SFTSettings, extra: dict[str, Any]) -> ModelManifest:
    return ModelManifest(kind=settings.method, base=base_reference(settings.base_model), format=format_spec(),
                         generation=asdict(settings.generation), max_behaviours=settings.max_behaviours,
                         extra={"stage": "sim_sft", DECIDE_BY_REASONING: settings.decide_by_reasoning,
                                **extra})


def sft_curve(settings: SFTSettings, checkpoint_dir: str | Path, seed: int = 0) -> Any:
    """The learning curve of this SFT run (`sim_sft.curve`; None when off): the model as it trains, in
    the simulator's runtime, on the held-out decision items and the scripted agent's dialogues."""
    if not settings.curve.enabled:
        return None
    from mimesis_rl.models.loading import load_tokenizer

    tokenizer = load_tokenizer(settings.base_model, padding_side="left")
    return curve_callback(settings.curve, int(settings.option("max_steps")), tokenizer,
                          manifest_for(settings, {}), checkpoint_dir, seed, domains=settings.env.domains,
                          adapter="default" if settings.method == "lora" else None)


def phase_settings(settings: SFTSettings, phase: dict[str, Any], warm_start: str | None) -> SFTSettings:
    """One phase of the curriculum: the stage's settings with the phase's keys over them (`env` and
    `trainer` merged key by key), continuing `warm_start`, saved under the stage's checkpoint folder;
    no curve or leave model (those are the final model's)."""
    section = settings.to_json()
    for key, value in phase.items():
        if key == "name":
            continue
        merge = isinstance(value, dict) and isinstance(section.get(key), dict)
        section[key] = {**section[key], **value} if merge else value
    folder = Path(settings.checkpoint_dir) / "phases" / phase["name"]
    section.update(phases=[], warm_start=warm_start, output_dir=str(folder / "model"),
                   checkpoint_dir=str(folder / "checkpoints"), curve={"enabled": False},
                   leave={**section["leave"], "enabled": False})
    return SFTSettings.from_section(section)


def train_sft(settings: SFTSettings, seed: int = 0, data_hash: str = "") -> dict[str, Any]:
    """Train the curriculum's phases (each once: a finished phase is kept and skipped when the stage
    runs again), then these settings from the last phase's adapter; save the simulator."""
    if not settings.phases:
        return train_once(settings, seed, data_hash)
    start, done, key = settings.warm_start, {}, ""
    for phase in settings.phases:
        step = phase_settings(settings, phase, start)
        # chained through the previous key: a changed phase retrains the phases after it too
        key = fingerprint(run_identity(step.to_json()), seed, data_hash, key)
        record = Path(step.output_dir) / PHASE_RECORD
        kept = json.loads(record.read_text()) if record.exists() else {}
        if kept.get("key") == key:
            log.info("sim_sft phase %r: finished before, kept (%s)", phase["name"], step.output_dir)
            done[phase["name"]] = kept["metrics"]
        else:
            log.info("sim_sft phase %r: %s steps", phase["name"], step.option("max_steps"))
            done[phase["name"]] = logged_metrics(
                train_once(step, seed, data_hash, prefix=f"sft.phase.{phase['name']}"))
            if os.environ.get("RANK", "0") == "0":  # the process that saved the model
                write_json(record, {"key": key, "metrics": done[phase["name"]]})
        start = step.output_dir
    # the phases stay in the final run's settings, so its checkpoints are keyed by them: a changed phase
    # retrains what follows it instead of resuming a checkpoint grown from the old one
    metrics = train_once(replace(settings, warm_start=start), seed, data_hash)
    metrics.update({f"phase.{name}.{k}": v for name, m in done.items() for k, v in m.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)})
    if not settings.keep_checkpoints:
        shutil.rmtree(Path(settings.checkpoint_dir) / "phases", ignore_errors=True)
    return metrics


def train_once(settings: SFTSettings, seed: int = 0, data_hash: str = "",
               prefix: str = "sft") -> dict[str, Any]:
    """Train (resuming when a checkpoint of the same settings and data exists) and save the simulator."""
    train_convs = _read(settings.train, settings.limit_train)
    val = _read(settings.val, settings.limit_val)
    checkpoint_dir, resume = checkpoint_folder(settings, seed, data_hash)
    env_dialogues = environment_dialogues(settings, seed)
    onpolicy = onpolicy_decisions(settings, checkpoint_dir, seed)
    curve = sft_curve(settings, checkpoint_dir, seed)
    trainer = build_trainer(settings, train_convs, val, checkpoint_dir, seed, env_dialogues=env_dialogues,
                            extra_callbacks=[curve] if curve else None, prefix=prefix, onpolicy=onpolicy)
    rows = trainer.train_dataset
    result, metrics = train(trainer, resume)
    if curve is not None:
        metrics["curve"] = curve.points
    metrics.update({
        **first_last(trainer.state.log_history, "loss", "logged_loss"),
        "train_conversations": len(train_convs),
        "train_examples": len(rows),
        "onpolicy_decisions": len(onpolicy),
        "trainable_params": int(sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)),
    })
    if hasattr(trainer.data_collator, "found"):  # a SpanWeightCollator: spans weighed, of those asked for
        metrics.update({"verdict_spans.asked": trainer.data_collator.asked,
                        "verdict_spans.found": trainer.data_collator.found})
    tokens = [e.get("num_tokens") for e in trainer.state.log_history if e.get("num_tokens")]
    if tokens and metrics["train_seconds"] > 0:
        metrics["train_tokens"] = int(tokens[-1])
        metrics["tokens_per_second"] = float(tokens[-1]) / metrics["train_seconds"]
    if trainer.eval_dataset is not None:
        metrics["eval_loss"] = float(trainer.evaluate()["eval_loss"])
    fit = settings.leave.enabled and trainer.is_world_process_zero()  # only the main process saves it
    leave = fit_leave_model(train_convs + env_dialogues, val, settings.leave) if fit else None
    info = leave_info(leave)
    metrics.update({f"leave_model.{k}": v for k, v in info.items() if isinstance(v, int | float)})
    extra = {"data_hash": data_hash, "metrics": logged_metrics(metrics), "leave_model": info}
    weights = "adapter" if settings.method == "lora" else "model"
    files = {LEAVE_FILE: leave} if leave is not None else {}
    manifest = manifest_for(settings, extra)
    finish(trainer, settings, checkpoint_dir,
           lambda: save_simulator(trainer, settings.output_dir, manifest, weights, files))
    trainer.accelerator.wait_for_everyone()  # a next phase loads what process 0 just saved
    return metrics


def run_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A worker's job: the payload `tasks.sim_sft` writes for `accelerate launch`."""
    return train_sft(SFTSettings.from_section(payload["settings"]), seed=int(payload.get("seed", 0)),
                     data_hash=payload.get("data_hash", ""))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    worker_main("mimesis_rl.simulator.sft", run_payload)
