"""Simulator RL: TRL's `GRPOTrainer` on the SFT simulator's adapter (or whole model), with fidelity rewards.

    python -m tasks.sim_rl                       # the stage (reads params.yaml `sim_rl`)

Steps: build prompts from several domains (corpus contexts + contexts of environment dialogues on
goal cards, `rl_data`); render each as the runtime does (chat template, then the forced `<think>`:
GRPO trains the very turns `UserSimulator` will sample, and every reward parses `<think>` +
completion); load the SFT adapter once; let it answer corpus contexts for the realism
discriminator's "simulated" class (the policy itself before its first step, so no second model
copy); train the adapter further with the weighted rewards; save a simulator folder. With
`beta > 0` the KL reference is the base model (TRL disables the adapter for it). A fully fine-tuned
SFT simulator (`sim_sft.method: full`) trains on as a whole model, fp32 master weights, and saves as
one; its KL reference (`beta > 0`) is the SFT model itself, which TRL loads from its folder.

Memory (benchmarks/sim_memory.py, results/sim_memory.json): one model in the process; the behaviour
labeler's MiniLM is the only other model. The peak is GRPO's loss + backward: TRL's fused LM head
never holds the (tokens x 49,152) logits, but off CUDA/XPU (no Triton) it scores every position of
the micro-batch, prompt included, in fp32 tiles of 32,768 vocabulary columns, several alive at once
in its backward, so memory follows the micro-batch's tokens. params.yaml therefore scores each step's
8 completions in 2 micro-batches of 4 (`gradient_accumulation_steps` 2 = TRL's `steps_per_generation`:
one generation per step, the same loss) with gradient checkpointing (no activations of 30 layers).
"""

from __future__ import annotations

import gc
import json
import logging
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.data.schema import Conversation
from mimesis_rl.models.artifact import ModelManifest, base_reference, read_manifest
from mimesis_rl.models.inference.sources import resolve_base
from mimesis_rl.settings import from_section
from mimesis_rl.simulator.artifact import DECIDE_BY_REASONING, save_simulator
from mimesis_rl.simulator.curve import CurveSettings, curve_callback
from mimesis_rl.simulator.discriminator import FILE_NAME as DISCRIMINATOR_FILE
from mimesis_rl.simulator.discriminator import TurnDiscriminator
from mimesis_rl.simulator.env_data import EnvDialogues
from mimesis_rl.simulator.format import THINK_OPEN, format_spec
from mimesis_rl.simulator.leaving import FILE as LEAVE_FILE
from mimesis_rl.simulator.leaving import LeaveModel
from mimesis_rl.simulator.rewards import build_rewards, slot_vocabulary
from mimesis_rl.simulator.rewards.fidelity import PatternPredictor
from mimesis_rl.simulator.rewards.slots import load_slots
from mimesis_rl.simulator.rl_data import build_prompts, length_range
from mimesis_rl.simulator.rl_rollout import GENERATION_BACKENDS, make_rollout_func
from mimesis_rl.training.checkpoints import checkpoint_folder, finish, train
from mimesis_rl.training.config import (
    TrainingSettings,
    parse_settings,
    precision_kwargs,
    trainer_config,
)
from mimesis_rl.training.launch import worker_main
from mimesis_rl.training.policy import load_trainable_adapter, load_trainable_model
from mimesis_rl.training.trainers import (
    MlflowMetricsCallback,
    first_last,
    logged,
    logged_metrics,
    with_clean_param_groups,
)

log = logging.getLogger(__name__)

DEFAULT_WEIGHTS = {"pattern_fidelity": 1.0, "realism": 1.0, "goal_consistency": 0.5, "goal_pursuit": 0.5,
                   "paced_disclosure": 0.5, "role_adherence": 1.0, "format": 0.5, "decision": 1.0,
                   "answers": 1.0}


@dataclass(frozen=True)
class DiscriminatorSettings:
    """The realism reward's discriminator (`sim_rl.discriminator`).

    features: `cheap` (style + character n-grams) or `minilm` (style + MiniLM embeddings).
    samples: contexts the SFT simulator answers to make the "simulated" class.
    batch_size: contexts generated at once (a smaller batch holds less memory).
    c: inverse regularisation of the logistic regression.
    """

    features: str = "cheap"
    samples: int = 96
    batch_size: int = 8
    c: float = 1.0


@dataclass(frozen=True)
class RLSettings(TrainingSettings):
    """Simulator RL (`sim_rl:` in params.yaml).

    Inputs:
        sft_dir: the SFT simulator folder; train: conversations JSONL (contexts + references).
    Prompts:
        corpus_prompts_per_domain; env_prompts_per_domain: contexts of environment dialogues per
        domain (any user turn, openings included); decision_prompts_per_domain: environment states
        where the card decides (a pending proposal at, within or beyond the card's limit; a question
        about a slot; `simulator.decisions`), for the decision and answers rewards; env: which
        dialogues (presets, domains, episodes_per_domain; see `EnvDialogues`; decision states use
        the domains and episodes_per_domain); max_prompt_tokens: older exchanges are dropped
        beyond it.
    Rewards:
        rewards: weight per reward (0 leaves it out); labeler: the behaviour labeler for pattern
        fidelity (a `mimesis_rl.behavior` backend name); discriminator: see DiscriminatorSettings;
        decide_by_reasoning: the decision reward reads a reply whose message says neither yes nor no
        by its reasoning's verdict (a verdict-first simulator played with
        `UserSimulator.decide_by_reasoning`), not as a no; on by itself when the SFT folder decides by
        its reasoning (`sim_sft.decide_by_reasoning`), and the trained folder then records it too;
        outcomes_alone: on a pending proposal (a question) the decision (answers) reward is the whole
        reward, so realism and style cannot outvote the outcome within a group.
    Generation: `engine` samples GRPO's completions on the project's engine (`simulator.rl_rollout`),
        `trl` with TRL's own `generate`; same prompts, sampling settings and stops.
    GRPO: `trainer:` holds TRL `GRPOConfig` options as they are (see RLSettings.TRAINER_DEFAULTS).
    Hardware / output: see TrainingSettings.
    """

    sft_dir: str = "models/simulator/sft"
    train: str = "data/processed/conversations/train.jsonl"
    limit_train: int | None = None
    corpus_prompts_per_domain: int = 64
    env_prompts_per_domain: int = 4
    decision_prompts_per_domain: int = 0
    env: EnvDialogues = field(default_factory=EnvDialogues)
    max_prompt_tokens: int = 768
    rewards: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    decide_by_reasoning: bool = False
    outcomes_alone: bool = False
    labeler: str = "rules"
    discriminator: DiscriminatorSettings = field(default_factory=DiscriminatorSettings)
    generation: str = "engine"
    curve: CurveSettings = field(default_factory=CurveSettings)
    output_dir: str = "models/simulator/rl"
    checkpoint_dir: str = "checkpoints/sim_rl"

    TRL_CONFIG = "GRPOConfig"
    # GRPOConfig options unless params.yaml says otherwise. 8 completions per step (2 prompts x 4), scored
    # in 2 micro-batches of 4 with checkpointed layers (memory: see the module docstring).
    TRAINER_DEFAULTS = {
        "max_steps": 20, "learning_rate": 5e-5, "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 2, "num_generations": 4, "max_completion_length": 64,
        "temperature": 0.9, "top_p": 1.0, "beta": 0.0, "loss_type": "dapo", "logging_steps": 1,
        "save_steps": 10, "save_total_limit": 2,
        "gradient_checkpointing": True,
    }
    TRAINER_OWNED = ("save_strategy", "reward_weights")  # reward_weights: from `rewards`

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> RLSettings:
        section = dict(section or {})
        disc = from_section(DiscriminatorSettings, section.pop("discriminator", None), "sim_rl.discriminator")
        env = from_section(EnvDialogues, section.pop("env", None), "sim_rl.env")
        curve = from_section(CurveSettings, section.pop("curve", None), "sim_rl.curve")
        rewards = {**DEFAULT_WEIGHTS, **dict(section.pop("rewards", None) or {})}
        if section.get("generation", "engine") not in GENERATION_BACKENDS:
            raise ValueError(f"sim_rl.generation: {section['generation']!r}, "
                             f"expected one of {GENERATION_BACKENDS}")
        return parse_settings(cls, section, "sim_rl", discriminator=disc, env=env, rewards=rewards,
                              curve=curve)

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
    parsed = simulator.reply([r["messages"] for r in sample], seed=seed)
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


def render_prompts(rows: list[dict[str, Any]], tokenizer: Any, limit: int) -> None:
    """Each row's `prompt` becomes the text the runtime feeds the model: the chat template of the
    (trimmed) messages with the generation prompt, then `<think>`. The messages stay in `messages`
    (for the discriminator's samples) and, as JSON, in `context` (for the pattern-fidelity labeler)."""
    from mimesis_rl.models.inference.chat import ChatFormat
    from mimesis_rl.simulator.runtime import fit_messages, prompt_text

    chat = ChatFormat(tokenizer)
    think = len(tokenizer.encode(THINK_OPEN, add_special_tokens=False))
    for row in rows:  # TRL's GRPO does not truncate prompts: keep the recent dialogue in the window
        messages = fit_messages(chat, row["prompt"], limit - think)
        row["messages"] = messages
        row["context"] = json.dumps(messages)
        row["prompt"] = prompt_text(chat, messages)


def train_rl(settings: RLSettings, seed: int = 0, data_hash: str = "",
             extra_callbacks: list[Any] | None = None,
             label_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Fit the discriminator, run GRPO from the SFT adapter (or full model), save the RL simulator folder."""
    from datasets import Dataset
    from transformers import AutoConfig
    from trl import GRPOTrainer

    from mimesis_rl.models.inference.runner import ModelRunner
    from mimesis_rl.models.loading import load_tokenizer
    from mimesis_rl.simulator.runtime import UserSimulator

    sft_dir = Path(settings.sft_dir)
    manifest = read_manifest(sft_dir)
    if manifest.kind not in ("lora", "full"):
        raise ValueError(f"{sft_dir}: RL continues a LoRA or fully fine-tuned simulator, found kind "
                         f"{manifest.kind!r}")
    full = manifest.kind == "full"
    adapter = None if full else "default"  # what the runtime samples through
    # the decision reward reads decisions as the simulator will be played: as its folder says, or as asked
    by_reasoning = settings.decide_by_reasoning or bool(manifest.extra.get(DECIDE_BY_REASONING))
    checkpoint_dir, resume = checkpoint_folder(settings, seed, data_hash)
    bf16_base = precision_kwargs(settings.device, settings.bf16)["bf16"] and not settings.deepspeed
    # Built first: GRPOConfig checks the batch arithmetic before any model is loaded.
    config = trainer_config(settings, checkpoint_dir, seed, "sim_rl", save_strategy="steps")
    conversations: list[Conversation] = read_conversations(settings.train)
    if settings.limit_train:
        conversations = conversations[: settings.limit_train]
    rows = build_prompts(conversations, settings.corpus_prompts_per_domain, settings.env_prompts_per_domain,
                         settings.env.domains, seed, manifest.max_behaviours, settings.env.presets, "all",
                         settings.decision_prompts_per_domain, settings.env.episodes_per_domain)
    metrics: dict[str, Any] = {"prompts": len(rows),
                               "prompts_corpus": sum(r["source"] == "corpus" for r in rows),
                               "prompts_env": sum(r["source"] == "env" for r in rows),
                               "prompts_decision": sum(r["decision"] != "" for r in rows),
                               "prompts_question": sum(r["asked_slots"] != "[]" for r in rows),
                               "prompt_domains": len({r["domain"] for r in rows})}

    base_dir = resolve_base(sft_dir, manifest)
    tokenizer = load_tokenizer(sft_dir / "tokenizer" if (sft_dir / "tokenizer").is_dir() else base_dir,
                               padding_side="left")
    positions = int(getattr(AutoConfig.from_pretrained(base_dir), "max_position_embeddings", 0) or 10**9)
    completion = int(settings.option("max_completion_length"))
    render_prompts(rows, tokenizer, min(settings.max_prompt_tokens, positions - completion))
    # GRPO generates padded batches: keep the KV heads grouped (same numbers)
    model = (load_trainable_model(sft_dir / "model", grouped_attention=True) if full
             else load_trainable_adapter(base_dir, sft_dir / "adapter", bf16_base, grouped_attention=True))

    discriminator = None
    rewards = dict(settings.rewards)
    if rewards.get("realism", 0.0):
        # The "simulated" class: the SFT simulator's turns (the policy before its first step), as long
        # as GRPO's completions may be, sampled by the one runtime.
        sampling = replace(manifest.sampling, max_new_tokens=completion)
        # reuse_cache off: these are one-off contexts, so no row's KV cache is kept once sampled.
        runner = ModelRunner(model, tokenizer, sampling, adapter=adapter, seed=seed, reuse_cache=False)
        sft_sim = UserSimulator.from_manifest(runner, manifest, name="sft",
                                              batch_size=settings.discriminator.batch_size)
        try:
            discriminator, disc_metrics = fit_discriminator(sft_sim, rows, settings.discriminator, seed)
            metrics.update(disc_metrics)
        except ValueError as exc:  # an SFT simulator that never holds the format (tiny test models)
            log.warning("realism reward left out: %s", exc)
            rewards["realism"] = 0.0
            metrics["discriminator.skipped"] = 1.0
        del sft_sim, runner
        gc.collect()
    predictor = (pattern_predictor(settings.labeler, label_params)
                 if rewards.get("pattern_fidelity", 0.0) or rewards.get("answers", 0.0) else None)
    vocabulary = slot_vocabulary(load_slots(r["goal_slots"]) for r in rows)
    funcs, weights = build_rewards(rewards, predictor=predictor, discriminator=discriminator,
                                   vocabulary=vocabulary, length_range=length_range(conversations),
                                   completion_prefix=THINK_OPEN,
                                   decide_by_reasoning=by_reasoning, outcomes_alone=settings.outcomes_alone)
    config.reward_weights = weights
    for row in rows:
        del row["messages"]  # the dataset keeps plain columns (the messages are in `context`)
    curve = curve_callback(settings.curve, int(settings.option("max_steps")), tokenizer, manifest,
                           checkpoint_dir, seed, settings.discriminator.batch_size, settings.env.domains,
                           adapter=adapter)
    trainer = with_clean_param_groups(GRPOTrainer)(
        model=model, reward_funcs=funcs, args=config, train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[MlflowMetricsCallback("rl"), *([curve] if curve else []), *(extra_callbacks or [])],
        rollout_func=make_rollout_func(tokenizer, seed, adapter) if settings.generation == "engine" else None)
    _, run_metrics = train(trainer, resume)
    metrics.update(run_metrics)
    if curve is not None:
        metrics["curve"] = curve.points
        if curve.restored is not None:  # the saved adapter is this step's (curve.select), not the last's
            metrics["curve_selected_step"] = curve.restored
    history = trainer.state.log_history
    metrics.update(first_last(history, "reward", "reward"))
    for name in [f.__name__ for f in funcs]:
        # TRL logs None for a step none of whose prompts the reward applies to (decision and answers
        # judge only their own prompts): `steps` says how many steps it judged, first/last are theirs.
        values = logged(history, f"rewards/{name}/mean")
        metrics[f"reward.{name}.steps"] = len(values)
        if values:
            metrics[f"reward.{name}.first"] = float(values[0])
            metrics[f"reward.{name}.last"] = float(values[-1])
    out = ModelManifest(
        kind=manifest.kind, base=base_reference(base_dir), generation=manifest.generation,
        format=format_spec(), max_behaviours=manifest.max_behaviours, behaviours=manifest.behaviours,
        extra={"stage": "sim_rl", "parent_simulator": str(settings.sft_dir), "data_hash": data_hash,
               "rewards": rewards, "metrics": logged_metrics(metrics),
               "leave_model": manifest.extra.get("leave_model", {}),
               DECIDE_BY_REASONING: by_reasoning})
    files: dict[str, Any] = {DISCRIMINATOR_FILE: discriminator} if discriminator is not None else {}
    if (sft_dir / LEAVE_FILE).exists():  # RL trains the words; when to leave stays the SFT stage's model
        files[LEAVE_FILE] = LeaveModel.load(sft_dir / LEAVE_FILE)
    finish(trainer, settings, checkpoint_dir,
           lambda: save_simulator(trainer, settings.output_dir, out, "model" if full else "adapter", files))
    return metrics


def run_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A worker's job: the payload `tasks.sim_rl` writes for `accelerate launch`."""
    return train_rl(RLSettings.from_section(payload["settings"]), seed=int(payload.get("seed", 0)),
                    data_hash=payload.get("data_hash", ""), label_params=payload.get("label_params"))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    worker_main("mimesis_rl.simulator.rl", run_payload)
