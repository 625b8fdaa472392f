"""The typed shape of params.yaml: every section, every key, its type and range, in one place.

Why: a typo (`tset` for `test`), a wrong type (`seed: 12.7`, fractions as a string) or an unknown
key used to pass silently or end in a traceback deep inside a stage. These models say what a good
file holds; mimesis_rl.params.check holds the checking (error wording, cross-key checks, TRL fields).

The models are TypedDicts (`total=False`): a key may be left out (the stage's own default applies),
but a key that is present must be known and of the right type (pydantic strict mode: no `"12"` for
an int, no 12.7 for an int, no 1 for a bool). The stages' settings classes (SFTSettings,
ServeSettings, ...) build themselves from the checked dict through mimesis_rl.settings.from_section.

Blocks passed through to another library (a TRL `trainer:` block, a coach's `coach_options`) are
typed maps here; the stage checks their keys against that library's config class.

Adding a knob: add the field to its settings class and to its model here (tests/unit/test_params.py
fails while the two disagree). This module is the one place params.yaml's shape is written down.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required

from pydantic import AfterValidator, ConfigDict, Field, with_config
from typing_extensions import TypedDict

STRICT = ConfigDict(extra="forbid", strict=True)

# Ranges (pydantic constraints), named so that a reader sees the intent.
Share = Annotated[float, Field(ge=0.0, le=1.0)]  # a fraction of something
PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0.0)]
NonNegFloat = Annotated[float, Field(ge=0.0)]
Temperature = Annotated[float, Field(ge=0.0)]
TopP = Annotated[float, Field(gt=0.0, le=1.0)]
Port = Annotated[int, Field(ge=1, le=65535)]
Bf16 = bool | Literal["auto"]
Device = Annotated[str, Field(pattern=r"^(auto|cpu|cuda(:\d+)?|mps)$")]
DType = Literal["float32", "bfloat16", "float16"]
SplitName = Literal["train", "val", "test"]


# --- data stages -------------------------------------------------------------------------------

@with_config(ConfigDict(extra="allow", strict=True))  # other keys are the adapter's own options
class Source(TypedDict, total=False):
    adapter: Required[Literal["chitchat", "casino", "messages"]]
    input: Required[str]  # a file, a folder or `embedded`


@with_config(STRICT)
class Ingest(TypedDict, total=False):
    sources: Annotated[list[Source], Field(min_length=1)]
    limit_per_source: PosInt | None
    output: str
    rejects: str
    max_bad_share: Share


@with_config(STRICT)
class Validate(TypedDict, total=False):
    input: str
    output: str
    quarantine: str
    report_dir: str | None  # null: no GX report or Data Docs
    max_bad_share: Share
    min_chars: NonNegInt
    max_chars: PosInt
    min_turns: NonNegInt
    max_turns: PosInt
    pii_action: Literal["flag", "quarantine", "redact"]
    max_line_bytes: PosInt


@with_config(STRICT)
class Fractions(TypedDict, total=False):
    train: Share
    val: Share
    test: Share


@with_config(STRICT)
class Split(TypedDict, total=False):
    input: str
    output_dir: str
    fractions: Fractions


# --- models ------------------------------------------------------------------------------------

@with_config(STRICT)
class Tiny(TypedDict, total=False):
    vocab_size: PosInt
    hidden_size: PosInt
    intermediate_size: PosInt
    num_hidden_layers: PosInt
    num_attention_heads: PosInt
    num_key_value_heads: PosInt
    max_position_embeddings: PosInt
    tokenizer_corpus: str


@with_config(STRICT)
class BaseModel_(TypedDict, total=False):
    kind: str  # smollm2 | tiny | a HF id / local path
    wheel: str
    output_dir: str
    dtype: DType
    tiny: Tiny


@with_config(STRICT)
class Models(TypedDict, total=False):
    device: Device
    cuda_dtype: DType
    cpu_dtype: DType | Literal["auto"]  # auto: bf16 where the CPU has native bf16, else fp32


@with_config(STRICT)
class Lora(TypedDict, total=False):
    r: PosInt
    alpha: PosInt
    dropout: Share
    target_modules: list[str] | str
    bias: Literal["none", "all", "lora_only"]


@with_config(STRICT)
class Sampling(TypedDict, total=False):
    max_new_tokens: PosInt
    do_sample: bool
    temperature: Temperature
    top_k: NonNegInt
    top_p: TopP
    max_retries: NonNegInt
    retry_temperature_step: NonNegFloat


@with_config(STRICT)
class Registry(TypedDict, total=False):
    register: bool
    name: str
    alias: str
    bundle_base: bool | Literal["auto", "always", "never"]
    max_bundle_mb: PosFloat


# --- behaviour labels and reasoning ------------------------------------------------------------

@with_config(STRICT)
class ChatEndpoint(TypedDict, total=False):
    base_url_env: str
    model_env: str
    api_key_env: str
    base_url: str | None
    model: str | None
    timeout_s: PosFloat
    max_retries: NonNegInt
    backoff_s: NonNegFloat
    concurrency: PosInt
    temperature: Temperature
    max_tokens: PosInt


@with_config(STRICT)
class LabelLLM(ChatEndpoint, total=False):
    threshold: Share
    instructions: Literal["guide", "taxonomy"]
    history_turns: NonNegInt


@with_config(STRICT)
class LabelRules(TypedDict, total=False):
    thresholds: Share | dict[str, Share]


@with_config(STRICT)
class LabelEmbedding(TypedDict, total=False):
    model_path: str | None
    max_seq_length: PosInt
    batch_size: PosInt
    precision: Literal["bfloat16", "float32", "int8"]
    threads: PosInt | None
    C: PosFloat
    C_grid: list[PosFloat] | None
    cv_folds: Annotated[int, Field(ge=2)]
    oos_max_share: Share
    seed: int
    quantize: bool  # legacy spelling of precision (int8 / the default)
    artifact: str


LabelerName = Literal["rules", "embedding", "llm", "ensemble"]


@with_config(STRICT)
class LabelEnsemble(TypedDict, total=False):
    members: list[Literal["rules", "embedding", "llm"]]
    min_rules_precision: Share
    mix: list[Literal["rules", "embedding", "llm"]] | None


@with_config(STRICT)
class Label(TypedDict, total=False):
    input_dir: str
    output_dir: str
    report_dir: str
    model_dir: str
    splits: list[SplitName]
    backend: LabelerName
    evaluate: list[LabelerName]
    gold: str | None
    max_bad_share: Share
    weak_labels: bool
    cross_source: bool
    rules: LabelRules
    embedding: LabelEmbedding
    ensemble: LabelEnsemble
    llm: LabelLLM


@with_config(STRICT)
class RationalizeTemplate(TypedDict, total=False):
    persona_rate: Share
    withheld_rate: Share


@with_config(STRICT)
class RationalizeModel(TypedDict, total=False):
    path: str
    batch_size: PosInt
    max_new_tokens: PosInt
    do_sample: bool
    temperature: Temperature
    top_p: TopP
    max_prompt_tokens: PosInt
    min_words: NonNegInt


@with_config(STRICT)
class RationalizeLLM(ChatEndpoint, total=False):
    min_words: NonNegInt


@with_config(STRICT)
class Rationalize(TypedDict, total=False):
    input_dir: str
    output_dir: str
    report_dir: str
    splits: list[SplitName]
    backend: Literal["template", "model", "llm"]
    max_overlap: Share
    keep_existing: bool
    chunk_size: PosInt
    template: RationalizeTemplate
    model: RationalizeModel
    llm: RationalizeLLM


# --- rollout and the simulator -----------------------------------------------------------------

@with_config(STRICT)
class Remote(TypedDict, total=False):
    """`rollout.remote`: how `openai:` users reach their server (models.inference.remote.RemoteOptions)."""

    api_key_env: str
    timeout_s: PosFloat
    max_retries: NonNegInt
    backoff_s: NonNegFloat
    concurrency: PosInt
    max_context_tokens: PosInt
    prefill: bool
    leave_model: str | None
    decide_by_reasoning: bool


@with_config(STRICT)
class Rollout(TypedDict, total=False):
    agent_max_new_tokens: PosInt
    agent_do_sample: bool
    agent_temperature: Temperature
    agent_top_p: TopP
    user_max_new_tokens: PosInt
    user_do_sample: bool
    user_temperature: Temperature
    user_top_p: TopP
    user_max_retries: NonNegInt
    user_max_context_tokens: PosInt | None
    default_base: str
    seed: int
    remote: Remote | None


TrainerOptions = dict[str, int | float | str | bool | list[Any] | dict[str, Any] | None]  # TRL's own fields


@with_config(STRICT)
class Training(TypedDict, total=False):
    """Shared by sim_sft and sim_rl (mimesis_rl.training.config.TrainingSettings; the agent sections
    name the same keys themselves)."""

    trainer: TrainerOptions
    device: Device
    bf16: Bf16
    deepspeed: str | None
    launcher: Literal["python", "accelerate"]
    accelerate_config: str | None
    output_dir: str
    checkpoint_dir: str
    keep_checkpoints: bool
    registry: Registry


@with_config(STRICT)
class EnvDialogues(TypedDict, total=False):
    share: Share
    presets: list[str]
    domains: list[str] | None
    episodes_per_domain: NonNegInt
    decision_share: Share
    decision_items: NonNegInt
    decision_focus: bool
    verdict_weight: PosFloat
    verdict_span: Literal["clause", "reply", "act"]
    verdict_first: bool
    onpolicy_dialogues: NonNegInt
    onpolicy_share: Share
    onpolicy_balanced: bool


@with_config(STRICT)
class Leave(TypedDict, total=False):
    enabled: bool
    c: PosFloat
    min_count: NonNegInt


# sim_sft, sim_rl, agent_sft and agent_rl (and its variants) also take any field of TRL's SFTConfig /
# GRPOConfig at the top level (lifted into the trainer options, with the aliases batch_size and
# grad_accum): such keys are checked against TRL by `_trl_extras`, which imports TRL only when a section
# holds a key the schema does not name.
TRL_SECTIONS = ConfigDict(extra="allow", strict=True)


@with_config(STRICT)
class SimCurve(TypedDict, total=False):
    enabled: bool
    fractions: list[Share]
    env_dialogues: NonNegInt
    decision_prompts: NonNegInt
    select: list[Literal["env_success_rate", "decision_accuracy", "decision_gap", "answers_accuracy"]]


@with_config(STRICT)
class SimSFTPhase(TypedDict, total=False):
    """One phase of `sim_sft.phases` (simulator.sft.phase_settings): the keys a phase may change."""

    name: Required[str]
    trainer: TrainerOptions
    env: EnvDialogues
    limit_train: PosInt | None
    window_turns: PosInt | None
    end_share: Share | None
    max_behaviours: NonNegInt


@with_config(TRL_SECTIONS)
class SimSFT(Training, total=False):
    train: str
    val: str | None
    limit_train: PosInt | None
    limit_val: PosInt | None
    max_behaviours: NonNegInt
    window_turns: PosInt | None
    end_share: Share | None
    leave: Leave
    env: EnvDialogues
    base_model: str
    method: Literal["lora", "full"]
    lora: Lora
    warm_start: str | None
    decide_by_reasoning: bool
    phases: list[SimSFTPhase]
    generation: Sampling
    curve: SimCurve


@with_config(STRICT)
class Discriminator(TypedDict, total=False):
    features: Literal["cheap", "minilm"]
    samples: PosInt
    batch_size: PosInt
    c: PosFloat


RewardName = Literal["pattern_fidelity", "realism", "goal_consistency", "goal_pursuit", "paced_disclosure",
                     "role_adherence", "format", "decision", "answers"]  # = simulator.rewards.REWARD_NAMES


@with_config(TRL_SECTIONS)
class SimRL(Training, total=False):
    sft_dir: str
    train: str
    limit_train: PosInt | None
    corpus_prompts_per_domain: NonNegInt
    env_prompts_per_domain: NonNegInt
    decision_prompts_per_domain: NonNegInt
    env: EnvDialogues
    max_prompt_tokens: PosInt
    rewards: dict[RewardName, NonNegFloat]
    decide_by_reasoning: bool
    outcomes_alone: bool  # on a proposal/question the outcome reward is the whole reward
    labeler: LabelerName
    discriminator: Discriminator
    generation: Literal["engine", "trl"]  # who samples GRPO's completions (simulator.rl_rollout)
    curve: SimCurve


@with_config(STRICT)
class NamedSpec(TypedDict, total=False):
    name: Required[str]
    spec: Required[str]


@with_config(STRICT)
class Fidelity(TypedDict, total=False):
    max_conversations: PosInt | None
    max_turns: PosInt | None
    turns_per_conversation: PosInt | None
    discriminator: Literal["cheap", "minilm"]
    embedding: Literal["minilm", "hashing"]
    clusters: PosInt
    perplexity_turns: NonNegInt
    max_context_tokens: PosInt | None
    real_patterns: Literal["labeler", "data"]
    weights: dict[Literal["behaviour", "turing", "distribution", "diversity", "goal", "termination", "role",
                          "perplexity"], NonNegFloat]
    seed: int


@with_config(STRICT)
class EnvironmentEval(TypedDict, total=False):
    enabled: bool
    domains: list[str] | None
    dialogues: PosInt
    first_seed: NonNegInt
    max_turns: PosInt | None
    agent: str
    reference: str
    repeat_run: PosInt
    transcripts: bool
    coach_horizon: PosInt
    batch: Literal["all", "domain"]
    simulators: list[str] | None


@with_config(STRICT)
class SimEval(TypedDict, total=False):
    data: str
    base_model: str
    simulators: Annotated[list[NamedSpec], Field(min_length=1)]
    labeler: LabelerName
    report_dir: str
    device: Device
    bf16: Bf16
    batch_size: PosInt
    fidelity: Fidelity
    environment: EnvironmentEval
    decision_items: NonNegInt


@with_config(ConfigDict(extra="allow", strict=True))  # other keys: sim_sft keys (checked by check_params)
class PanelMember(TypedDict, total=False):
    data: Literal["train", "val", "casino"]
    seed_offset: int
    registry: Registry
    optional: bool
    casino_dir: str
    casino_limit: PosInt | None


@with_config(ConfigDict(extra="allow", strict=True))  # other keys: sim_sft keys (checked by check_params)
class SimPanel(TypedDict, total=False):
    members: dict[str, PanelMember]


# --- serving -----------------------------------------------------------------------------------

def _no_keys_here(value: Any) -> Any:
    raise ValueError("API keys never go in params.yaml (it is in git): use $MIMESIS_API_KEYS or "
                     "serve.keys_file")


@with_config(STRICT)
class Serve(TypedDict, total=False):
    api_keys: Annotated[Any, AfterValidator(_no_keys_here)]
    model: str
    base_model: str
    batch_window_ms: NonNegFloat
    max_batch: PosInt
    max_sessions: PosInt
    session_ttl_s: PosFloat
    max_sessions_per_key: PosInt
    domains: list[str]
    auth: bool
    keys_file: str | None
    rate_per_s: PosFloat
    rate_burst: PosInt
    max_body_bytes: PosInt
    max_message_chars: PosInt
    max_messages: PosInt
    request_timeout_s: PosFloat
    expose_reasoning: bool
    expose_private: bool
    raw: bool  # /v1/chat/completions as a plain generation engine (mimesis_rl.serve.settings)


# --- agents ------------------------------------------------------------------------------------

@with_config(STRICT)
class AgentRegistry(TypedDict, total=False):
    register: bool
    bundle_base: bool | Literal["auto", "always", "never"]
    max_bundle_mb: PosFloat


@with_config(TRL_SECTIONS)
class AgentSFT(TypedDict, total=False):
    domains: list[str] | None
    users: Annotated[list[str], Field(min_length=1)]
    per_domain: PosInt | dict[str, NonNegInt]
    action_weight: PosFloat
    max_turns: PosInt | None
    max_length: PosInt
    base_model: str
    lora: Lora
    max_steps: Annotated[int, Field(ge=-1)]
    num_train_epochs: PosFloat
    learning_rate: PosFloat
    batch_size: PosInt
    grad_accum: PosInt
    logging_steps: PosInt
    trainer: TrainerOptions
    device: Device
    bf16: Bf16
    deepspeed: str | None
    launcher: Literal["python", "accelerate"]
    accelerate_config: str | None
    eval_users: list[str] | None
    eval_seeds: NonNegInt
    eval_domains: list[str] | None
    generation: Sampling
    output_dir: str
    checkpoint_dir: str
    save_steps: PosInt
    keep_checkpoints: bool
    seed_offset: int
    registry: AgentRegistry


@with_config(STRICT)
class CSD(TypedDict, total=False):
    enabled: bool
    lam: NonNegFloat
    form: Literal["advantage", "loss"]
    teacher: Literal["live", "ema"]
    ema_rate: Share
    coach: Literal["template", "model", "llm"]
    coach_options: dict[str, Any]  # the coach backend's own options
    horizon: NonNegInt
    shuffle: bool
    redact: bool
    note_role: str
    note_prefix: str
    max_note_tokens: PosInt
    max_teacher_tokens: PosInt | None
    teacher_batch_size: PosInt


@with_config(STRICT)
class AgentReward(TypedDict, total=False):
    success: NonNegFloat
    verifier: NonNegFloat
    turn_cost: NonNegFloat


@with_config(STRICT)
class Curve(TypedDict, total=False):
    enabled: bool
    fractions: list[Share]
    select: list[Literal["success_rate", "mean_reward", "acted_rate"]]


@with_config(TRL_SECTIONS)
class AgentRLCommon(TypedDict, total=False):
    user: str
    sft_dir: str
    base_model: str
    domains: list[str] | None
    prompts_per_domain: PosInt
    max_turns: PosInt | None
    reward: AgentReward
    agent_max_new_tokens: PosInt
    user_max_new_tokens: PosInt
    user_max_context_tokens: PosInt | None
    temperature: Temperature
    top_p: TopP
    max_steps: PosInt
    learning_rate: PosFloat
    batch_size: PosInt
    num_generations: Annotated[int, Field(ge=2)]
    beta: NonNegFloat
    loss_type: str
    kl_to_sft: bool
    logging_steps: PosInt
    trainer: TrainerOptions
    device: Device
    bf16: Bf16
    deepspeed: str | None
    eval_seeds: NonNegInt
    eval_domains: list[str] | None
    generation: Sampling
    curve: Curve
    csd: CSD
    output_dir: str
    report_dir: str
    checkpoint_dir: str
    save_steps: PosInt
    keep_checkpoints: bool
    registry: AgentRegistry
    launcher: Literal["python", "accelerate"]
    accelerate_config: str | None
    vllm: dict[str, Any]  # TRL's vLLM options (use_vllm, vllm_*), passed to GRPOConfig as given


@with_config(TRL_SECTIONS)
class AgentRLVariant(AgentRLCommon, total=False):
    user_dep: str  # dvc.yaml's dependency of the variant
    enabled: bool


@with_config(TRL_SECTIONS)
class AgentRL(AgentRLCommon, total=False):
    variants: dict[str, AgentRLVariant]


@with_config(STRICT)
class AgentSpec(TypedDict, total=False):
    name: Required[str]
    spec: Required[str]
    trained_on: str


@with_config(STRICT)
class Comparison(TypedDict, total=False):
    a: Required[str]
    b: Required[str]
    title: str


@with_config(STRICT)
class Claims(TypedDict, total=False):
    fidelity: str
    final: str
    baseline: str


@with_config(STRICT)
class AgentEval(TypedDict, total=False):
    agents: list[AgentSpec]
    members: list[str] | None
    envs: list[str] | None
    dialogues_per_cell: PosInt
    first_seed: NonNegInt
    max_turns: PosInt | None
    agent_max_new_tokens: PosInt
    user_max_new_tokens: PosInt
    user_max_context_tokens: PosInt | None
    sampling_seed: int
    bootstrap: PosInt
    confidence: Annotated[float, Field(gt=0.0, lt=1.0)]
    metric: Literal["success", "reward"]
    on_missing: Literal["skip", "fail"]
    base_model: str
    report_dir: str
    write_transcripts: bool
    coach_horizon: PosInt
    batch_dialogues: PosInt | None
    comparisons: dict[str, Comparison]
    claims: Claims


# --- promotion, report, orchestration ----------------------------------------------------------

@with_config(STRICT)
class Rule(TypedDict, total=False):
    metric: Required[str]
    better: Literal["higher", "lower"]
    min_gain: float
    interval: Literal["none", "not_worse", "better"]


@with_config(STRICT)
class Gate(TypedDict, total=False):
    registered_model: Required[str]
    candidate_alias: str
    champion_alias: str
    report: Required[str]
    row: Required[str]
    rules: Required[list[Rule]]
    dry_run: bool


@with_config(STRICT)
class Promote(TypedDict, total=False):
    report_dir: str
    simulator: Gate
    agent: Gate


@with_config(STRICT)
class Report(TypedDict, total=False):
    output: str
    validation: str
    label: str
    sim_eval: str
    agent_eval: str
    promote: str
    dialogues: NonNegInt
    images: Literal["embed", "link"]
    max_chars: PosInt
    title: str
    metrics: str


@with_config(STRICT)
class Evidence(TypedDict, total=False):
    output_dir: str
    sim_eval: str
    agent_eval: str
    metrics: str
    candidate: str
    baseline: str
    reference: str
    mimesis_agent: str
    sft_agent: str
    mimesis_vs_assistant: str
    csd_vs_rl: str
    env_ratio: Annotated[float, Field(gt=0.0, le=1.0)]
    env_domains: PosInt
    min_members: PosInt
    min_seeds: PosInt


@with_config(STRICT)
class Retrain(TypedDict, total=False):
    source_stages: list[str]
    decision: str


@with_config(STRICT)
class Pipeline(TypedDict, total=False):
    retries: NonNegInt
    retry_delay_seconds: NonNegFloat
    schedule_cron: str
    retrain: Retrain


@with_config(STRICT)
class Tracking(TypedDict, total=False):
    experiment: str


@with_config(STRICT)
class Sections(TypedDict, total=False):
    """The stage sections: what a profile overlays."""

    seed: int
    ingest: Ingest
    validate: Validate
    split: Split
    base_model: BaseModel_
    models: Models
    label: Label
    rationalize: Rationalize
    rollout: Rollout
    sim_sft: SimSFT
    sim_rl: SimRL
    sim_eval: SimEval
    sim_panel: SimPanel
    serve: Serve
    agent_sft: AgentSFT
    agent_rl: AgentRL
    agent_eval: AgentEval
    promote: Promote
    report: Report
    evidence: Evidence
    pipeline: Pipeline
    tracking: Tracking


@with_config(STRICT)
class ParamsFile(Sections, total=False):
    """The whole file: defaults, the active profile's name, the overlays."""

    profile: str
    profiles: dict[str, Sections | None]


SECTIONS: tuple[str, ...] = tuple(k for k in Sections.__annotations__ if k != "seed")
