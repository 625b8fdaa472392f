"""Agent RL: multi-turn GRPO against a frozen user, with TRL's `GRPOTrainer` and the rollout engine.

    python -m tasks.agent_rl --variant assistant   # (DVC runs one stage per training user, see dvc.yaml)
    accelerate launch --config_file infra/accelerate/cpu_multi.yaml -m mimesis_rl.agent.rl PAYLOAD.json

One GRPO step: TRL hands `rollout_func` the step's prompts ("<domain> <episode seed>", each repeated
`num_generations` times in a row); `run_rollouts` plays the whole dialogues in lockstep (one batched
generate per side per round, per-dialogue KV reuse) with the agent = the policy being trained (its
LoRA adapter `default`, sampled at the trainer's temperature) and the user = a frozen party on the same
base (`agent.users.UserFactory`: the assistant-prompted base with adapters off, a learned simulator as
the frozen adapter `user`, or a scripted user). The engine's token record goes back to TRL as
`prompt_ids`/`completion_ids`/`logprobs`/`env_mask`, so only the agent's own tokens carry loss; the
reward is the verifier's reward minus `turn_cost` per agent turn. The trainer is `agent.grpo`'s
`AgentGRPOTrainer` (or CSD's subclass of it, `agent.csd.CSDTrainer`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mimesis_rl.agent.grpo import REF_ADAPTER, AgentGRPOTrainer, ExtraLoss, StepTimer
from mimesis_rl.fsutil import write_json
from mimesis_rl.models.artifact import DEFAULT_SAMPLING
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.runner import ModelRunner, derive_seed
from mimesis_rl.settings import from_section
from mimesis_rl.training.checkpoints import checkpoint_folder, finish, train
from mimesis_rl.training.config import (
    TrainingSettings,
    parse_settings,
    precision_kwargs,
    trainer_config,
)
from mimesis_rl.training.launch import worker_main
from mimesis_rl.training.policy import load_trainable_adapter
from mimesis_rl.training.trainers import MlflowMetricsCallback, first_last

if TYPE_CHECKING:
    from mimesis_rl.agent.users import UserFactory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentRLSettings(TrainingSettings):
    """Agent GRPO (`agent_rl:` in params.yaml; `variants:` name the training users).

    Users:
        variant: the name of this run (`assistant`, `mimesis`, `mimesis_csd`): output folders, alias.
        user: the frozen training user (`prompted:assistant`, `learned:<folder | models:/…>`,
            `scripted:<preset>`); user_max_new_tokens, user_max_context_tokens: a model user's decoding.
    Episodes:
        domains (null = all 8), prompts_per_domain (distinct episode seeds), max_turns (agent turns per
        dialogue; null = the domain's limit), turn_cost (subtracted per agent turn from the reward).
    Policy:
        sft_dir: the agent_sft folder the policy starts from (its adapter also loaded frozen as `ref`).
        agent_max_new_tokens: the agent's turn length during training.
    GRPO: TRL `GRPOConfig` fields, at the top level as params.yaml writes them or under `trainer:`
        (see TRAINER_DEFAULTS): max_steps, learning_rate, batch_size (dialogues per step; a multiple
        of num_generations), num_generations, temperature and top_p (the agent's sampling during
        training), beta (KL to the SFT agent in the loss; 0 = logged only), loss_type, ... save_steps:
        a checkpoint every this many steps under `checkpoint_dir` (keyed by settings and seed); an
        interrupted run resumes from the newest; keep_checkpoints keeps them after the agent is saved.
        kl_to_sft: log it every step (one extra forward with the `ref` adapter).
    CSD:
        csd: the CSD block (`agent.csd.CSDSettings`: `enabled`, `lam`, …); when `enabled` the
            trainer is `agent.csd.CSDTrainer`.
    Evaluation:
        eval_seeds (dialogues per domain, greedy agent), eval_domains (null = `domains`), generation
        (the agent's decoding when played later; written into the folder).
    Engines:
        launcher: `python` (in process) | `accelerate` (`accelerate launch` with accelerate_config, e.g.
            infra/accelerate/cpu_multi.yaml or multi_gpu_zero2.yaml); batch_size is per process then.
            device, bf16, deepspeed: see TrainingSettings.
        vllm: TRL's vLLM mode, passed to `GRPOConfig` as given (`use_vllm`, `vllm_mode: colocate |
            server`, `vllm_server_base_url`, `vllm_gpu_memory_utilization`, ...); empty or
            `use_vllm: false` = off (CPU, tests). See README "Scaling out" for what it does with
            `rollout_func` today.
    """

    variant: str = "assistant"
    user: str = "prompted:assistant"
    sft_dir: str = "models/agent/sft"
    base_model: str = "models/base"
    domains: list[str] | None = None
    prompts_per_domain: int = 8
    max_turns: int | None = 4
    turn_cost: float = 0.02
    agent_max_new_tokens: int = 64
    user_max_new_tokens: int = 48
    user_max_context_tokens: int | None = 512
    kl_to_sft: bool = True
    eval_seeds: int = 4
    eval_domains: list[str] | None = None
    generation: SamplingParams = SamplingParams(max_new_tokens=64, do_sample=False)
    csd: dict[str, Any] = field(default_factory=dict)
    output_dir: str = "models/agent/rl"
    report_dir: str = "reports/agent_rl"
    checkpoint_dir: str = "checkpoints/agent_rl"
    vllm: dict[str, Any] = field(default_factory=dict)

    TRL_CONFIG = "GRPOConfig"
    TRAINER_DEFAULTS = {
        "max_steps": 4, "learning_rate": 1.0e-4, "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 1, "num_generations": 4, "max_completion_length": 4096,
        "temperature": 1.0, "top_p": 1.0, "beta": 0.0, "loss_type": "dapo", "logging_steps": 1,
        "save_steps": 4, "save_total_limit": 2, "gradient_checkpointing": False,
        "dataloader_num_workers": 0, "log_completions": False,
    }
    # checkpoints by steps; TRL's vLLM mode comes from the `vllm:` block (checked by `vllm_options`)
    TRAINER_OWNED = ("save_strategy", "use_vllm")

    def __post_init__(self) -> None:
        super().__post_init__()
        batch, groups = int(self.option("per_device_train_batch_size")), int(self.option("num_generations"))
        if batch % groups:
            raise ValueError(f"agent_rl.batch_size ({batch}) must be a multiple of num_generations "
                             f"({groups})")
        if groups < 2:
            raise ValueError("agent_rl.num_generations must be >= 2 (GRPO compares samples within a group)")
        bad = sorted(k for k in self.vllm if k != "use_vllm" and not k.startswith("vllm_"))
        if bad:
            raise ValueError(f"agent_rl.vllm: {bad} are not TRL vLLM options (use_vllm, vllm_*)")
        stray = sorted(k for k in self.trainer if k.startswith("vllm_"))
        if stray:
            raise ValueError(f"agent_rl: {stray} belong in the `vllm:` block")

    @classmethod
    def from_section(cls, section: dict[str, Any] | None, where: str = "agent_rl") -> AgentRLSettings:
        section = dict(section or {})
        generation = from_section(SamplingParams, section.pop("generation", None), f"{where}.generation")
        return parse_settings(cls, section, where, generation=generation)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def domain_list(self) -> list[str]:
        from mimesis_rl.envs.registry import DOMAINS

        return list(self.domains or DOMAINS)


def prompt_rows(domains: list[str], per_domain: int, offset: int = 2_000_000) -> list[dict[str, Any]]:
    """The GRPO dataset: one row per (domain, episode seed), domains interleaved."""
    return [
        {"prompt": [{"role": "user", "content": f"{d} {offset + i}"}], "domain": d}
        for i in range(per_domain)
        for d in domains
    ]


def parse_prompt(prompt: Any) -> tuple[str, int]:
    """`(domain, seed)` from a dataset prompt; a clear error for anything else."""
    text = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
    parts = str(text).split()
    if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
        raise ValueError(f"agent_rl prompt {text!r}: expected '<domain> <episode seed>'")
    return parts[0], int(parts[1])


def make_rollout_func(
    user_factory: Callable[[str], Any],
    tokenizer: Any,
    sampling: SamplingParams,
    max_turns: int | None,
    seed: int = 0,
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """TRL's `rollout_func(prompts, trainer)`: plays the dialogues and returns rows in prompt order.

    The agent samples at `trainer.temperature`; its sampling seeds change with the global step (and
    with the `#k` copy inside a group), the user's do not (keyed by episode seed): group spread is the
    agent's. Per-row episode records are left on `trainer._pending_episodes` for the trainer.
    """
    from mimesis_rl.envs.multi import MultiDomainEnv
    from mimesis_rl.envs.registry import make_env
    from mimesis_rl.rollout import ModelAgent, run_rollouts

    envs: dict[str, Any] = {}

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        keys = [parse_prompt(p) for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        agent_sampling = replace(
            sampling,
            do_sample=True,
            temperature=float(trainer.temperature),
            top_p=float(getattr(trainer, "top_p", sampling.top_p) or 1.0),
        )
        runner = ModelRunner(
            model,
            tokenizer,
            agent_sampling,
            adapter="default",
            seed=derive_seed(seed, "agent_rl", trainer.state.global_step),
        )
        agent = ModelAgent(runner, name="policy")
        rows: list[dict[str, Any] | None] = [None] * len(keys)
        start = time.perf_counter()
        # Every domain in one lockstep batch: one engine call per side per round, not one per domain.
        for domain in dict.fromkeys(d for d, _ in keys):
            envs.setdefault(domain, make_env(domain, max_turns=max_turns))
        result = run_rollouts(
            MultiDomainEnv(envs, keys, name="agent_rl", description="the RL domains, one batch"),
            agent,
            [user_factory(domain) for domain, _ in keys],
            list(range(len(keys))),
            progress=False,
            desc="rollout",
        )
        trl = result.to_trl()
        records = result.records()
        for i, (domain, _) in enumerate(keys):
            track = result.tracks[i]
            state = result.states[i]
            row = {k: trl[k][i] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask")}
            row.update(
                reward=trl["reward"][i],
                success=trl["success"][i],
                episode_id=trl["episode_id"][i],
                agent_turns=state.agent_turns,
                domain=domain,
                invalid_actions=state.invalid_actions,
                user=result.users[i],
            )
            record = records[i]
            record["env"] = domain
            record["agent_spans"] = [[t.start, t.end] for t in track.turns] if track else []
            record["prompt_len"] = len(row["prompt_ids"])
            row["episode"] = record
            rows[i] = row
        seconds = time.perf_counter() - start
        done = [r for r in rows if r is not None]
        if len(done) != len(keys):
            raise RuntimeError(f"rollout_func: {len(keys) - len(done)} of {len(keys)} rows missing")
        out = {
            k: [r[k] for r in done]
            for k in (
                "prompt_ids",
                "completion_ids",
                "logprobs",
                "env_mask",
                "reward",
                "success",
                "episode_id",
                "agent_turns",
                "domain",
            )
        }
        trainer._pending_episodes = [r["episode"] for r in done]
        agent_tokens = sum(sum(m) for m in out["env_mask"])
        trainer._rollout_stats = {
            "seconds": seconds,
            "agent_tokens": agent_tokens,
            "invalid_actions": sum(r["invalid_actions"] for r in done),
        }
        return out

    return rollout_func


def make_reward(turn_cost: float) -> Callable[..., list[float]]:
    def env_reward(
        completions: list[Any], reward: list[float], agent_turns: list[int], **_: Any
    ) -> list[float]:
        """The verifier's reward minus `turn_cost` per agent turn."""
        return [float(r) - turn_cost * int(t) for r, t in zip(reward, agent_turns, strict=True)]

    return env_reward


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
    `extra_loss` given) it is CSD's subclass, `agent.csd.CSDTrainer`."""
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
                            save_strategy="steps", **vllm_options(settings.vllm))
    rows = prompt_rows(settings.domain_list, settings.prompts_per_domain)
    kwargs: dict[str, Any] = {}
    trainer_cls: type[AgentGRPOTrainer] = AgentGRPOTrainer
    if settings.csd.get("enabled") and extra_loss is None:
        from mimesis_rl.agent.csd import CSDTrainer

        trainer_cls, kwargs = CSDTrainer, {"csd": settings.csd}
    trainer = trainer_cls(
        model=model,
        reward_funcs=make_reward(settings.turn_cost),
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


def reward_curve(history: list[dict[str, Any]], path: str | Path, title: str) -> Path:
    """PNG of reward (mean ± std) and success per step from the trainer's log history."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [e for e in history if "reward" in e]
    steps = [e.get("step", i + 1) for i, e in enumerate(rows)]
    mean = [e["reward"] for e in rows]
    std = [e.get("reward_std", 0.0) for e in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, mean, marker="o", label="reward (verifier − turn cost)")
    ax.fill_between(
        steps,
        [m - s for m, s in zip(mean, std, strict=True)],
        [m + s for m, s in zip(mean, std, strict=True)],
        alpha=0.2,
    )
    dead = [e.get("groups/dead_share") for e in rows]
    if all(d is not None for d in dead):
        ax.plot(steps, dead, linestyle="--", label="dead-group share")
    ax.set_xlabel("GRPO step")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def _pop_dialogues(result: dict[str, Any]) -> dict[str, Any]:
    return {domain: per.pop("dialogues") for domain, per in result.items() if "dialogues" in per}


def train_agent_rl(
    settings: AgentRLSettings, seed: int = 0, extra_loss: ExtraLoss | None = None
) -> dict[str, Any]:
    """Train, evaluate (greedy, on the training user) before/after, save the agent; returns metrics."""
    import mlflow

    from mimesis_rl.agent.artifact import save_agent
    from mimesis_rl.agent.evaluate import evaluate, paired_gain
    from mimesis_rl.rollout import ModelAgent

    checkpoint_dir, resume = checkpoint_folder(settings, seed, "")  # prompts follow from settings + seed
    trainer = build_trainer(settings, seed, extra_loss, output_dir=checkpoint_dir)
    model, tokenizer = trainer.model, trainer.processing_class
    eval_domains = settings.eval_domains or settings.domain_list
    eval_seeds = [10**7 + i for i in range(settings.eval_seeds)]
    users = {settings.user: trainer.user_factory}

    def score(adapter: str) -> dict[str, Any]:
        runner = ModelRunner(model, tokenizer, settings.generation, adapter=adapter, seed=seed)
        agent = ModelAgent(runner)
        scores = evaluate(agent, users, eval_domains, eval_seeds, settings.max_turns, keep_dialogues=True)
        return scores[settings.user]

    t0 = time.perf_counter()
    before = score(REF_ADAPTER) if settings.eval_seeds else {}
    _, trained = train(trainer, resume)
    train_seconds = trained["train_seconds"]
    after = score("default") if settings.eval_seeds else {}
    eval_seconds = time.perf_counter() - train_seconds - t0
    history = trainer.state.log_history
    report = Path(settings.report_dir)
    main = trainer.is_world_process_zero()  # under `accelerate launch` only process 0 writes reports
    if main:
        report.mkdir(parents=True, exist_ok=True)
        curve = reward_curve(
            history, report / "reward_curve.png", f"agent_rl · {settings.variant} vs {settings.user}"
        )
        if mlflow.active_run() is not None:
            mlflow.log_artifact(str(curve), artifact_path="agent_rl")
    timing = {k: round(sum(v) / len(v), 3) for k, v in trainer.timing.items() if v}
    metrics: dict[str, Any] = {
        "variant": settings.variant,
        "user": settings.user,
        "steps": trained["steps"],
        "resumed_from_step": trained["resumed_from_step"],
        "train_loss": trained["train_loss"],
        "train_seconds": round(train_seconds, 2),
        "eval_seconds": round(eval_seconds, 2),
        **first_last(history, "reward", "reward"),
        "frac_reward_zero_std": [e.get("frac_reward_zero_std") for e in history if "reward" in e],
        "mean_seconds": timing,
        "eval_before": before,
        "eval_after": after,
    }
    if before and after:
        metrics["success_gain"] = round(after["mean"]["success_rate"] - before["mean"]["success_rate"], 4)
        metrics["reward_gain"] = round(after["mean"]["mean_reward"] - before["mean"]["mean_reward"], 4)
        metrics["paired_gain"] = {k: paired_gain(before, after, k) for k in ("reward", "success")}
    outcomes = {when: _pop_dialogues(res) for when, res in (("before", before), ("after", after)) if res}
    if outcomes and main:  # per dialogue: an artifact, not hundreds of MLflow metrics
        write_json(report / "eval_dialogues.json", outcomes)
    finish(trainer, settings, checkpoint_dir, lambda: save_agent(
        model,
        tokenizer,
        settings.output_dir,
        settings.base_model,
        settings.generation,
        "agent_rl",
        extra={
            "variant": settings.variant,
            "user": settings.user,
            "csd": dict(settings.csd),
            "sft_dir": settings.sft_dir,
        },
    ))
    return metrics


def run_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A worker's job under `accelerate launch`: the payload `tasks.agent_rl` writes."""
    return train_agent_rl(AgentRLSettings.from_section(payload["settings"]), seed=int(payload.get("seed", 0)))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    worker_main("mimesis_rl.agent.rl", run_payload)
