"""`AgentRLSettings`: the `agent_rl` block of params.yaml (one variant of it), checked when it is read."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mimesis_rl.agent.rl_reward import RewardWeights
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.settings import from_section
from mimesis_rl.training.config import TrainingSettings, parse_settings
from mimesis_rl.training.curves import DEFAULT_FRACTIONS

CURVE_KEYS = ("success_rate", "mean_reward", "acted_rate")  # a curve point: means over the eval domains


@dataclass(frozen=True)
class CurveSettings:
    """`agent_rl.curve`: enabled (needs eval_seeds > 0), fractions (of max_steps, for `curve_steps`);
    select: the evaluation's means (`CURVE_KEYS`), in order, by which the saved agent is the
    best point's rather than the last's (`training.curves`; empty: the last)."""

    enabled: bool = True
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    select: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fractions", tuple(float(f) for f in self.fractions))
        object.__setattr__(self, "select", tuple(self.select))
        if unknown := set(self.select) - set(CURVE_KEYS):
            raise ValueError(f"agent_rl.curve.select: {sorted(unknown)} are not curve keys {CURVE_KEYS}")
        if not self.fractions or any(not 0.0 <= f <= 1.0 for f in self.fractions):
            raise ValueError(f"agent_rl.curve.fractions: {list(self.fractions)}: one or more, in [0, 1]")


@dataclass(frozen=True)
class AgentRLSettings(TrainingSettings):
    """Agent GRPO (`agent_rl:` in params.yaml; `variants:` name the training users).

    Users:
        variant: the name of this run (`assistant`, `mimesis`, `mimesis_csd`): output folders, alias.
        user: the frozen training user (`prompted:assistant`, `learned:<folder | models:/…>`,
            `scripted:<preset>`); user_max_new_tokens, user_max_context_tokens: a model user's decoding.
    Episodes:
        domains (null = all 8), prompts_per_domain (distinct episode seeds), max_turns (agent turns per
        dialogue; null = the domain's limit).
    Reward:
        reward: `rl_reward.RewardWeights` {success, verifier, turn_cost}: success · w_success + the
            verifier's reward · w_verifier − turn_cost per agent turn (an accepted, successful outcome
            dominates; partial credit breaks ties).
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
        csd: the CSD block (`agent.csd.settings.CSDSettings`: `enabled`, `lam`, …); when `enabled`
            the trainer is `agent.csd.trainer.CSDTrainer`.
    Evaluation:
        eval_seeds (dialogues per domain, greedy agent), eval_domains (null = `domains`), generation
        (the agent's decoding when played later; written into the folder).
        curve: `CurveSettings` {enabled, fractions}: the same evaluation at curve_steps(max_steps,
            fractions) during training (`rl_curve`); step 0 is eval_before, the last step eval_after.
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
    reward: RewardWeights = RewardWeights()
    agent_max_new_tokens: int = 64
    user_max_new_tokens: int = 48
    user_max_context_tokens: int | None = 512
    kl_to_sft: bool = True
    eval_seeds: int = 4
    eval_domains: list[str] | None = None
    generation: SamplingParams = SamplingParams(max_new_tokens=64, do_sample=False)
    curve: CurveSettings = CurveSettings()
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
    # checkpoints by steps; TRL's vLLM mode comes from the `vllm:` block (checked by `vllm_options`);
    # the reward's weights from `reward:`, summed before the group normalisation (`rl_reward`)
    TRAINER_OWNED = ("save_strategy", "use_vllm", "reward_weights", "multi_objective_aggregation")

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
        reward = from_section(RewardWeights, section.pop("reward", None), f"{where}.reward")
        curve = from_section(CurveSettings, section.pop("curve", None), f"{where}.curve")
        return parse_settings(cls, section, where, generation=generation, reward=reward, curve=curve)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def domain_list(self) -> list[str]:
        from mimesis_rl.envs.registry import DOMAINS

        return list(self.domains or DOMAINS)
