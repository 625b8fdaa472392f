"""The typed shape of params.yaml: every section, every key, its type and range, in one place.

Why: a typo (`tset` for `test`), a wrong type (`seed: 12.7`, fractions as a string) or an unknown
key used to pass silently or end in a traceback deep inside a stage. `check_params` validates the
defaults and every profile overlay (and each profile's merged result) before any stage runs; errors
name the file and the key path (`params.yaml: profiles.tiny.sim_sft.lora.r: ...`).

The models are TypedDicts (`total=False`): a key may be left out (the stage's own default applies),
but a key that is present must be known and of the right type (pydantic strict mode: no `"12"` for
an int, no 12.7 for an int, no 1 for a bool). `load_params` (mimesis_rl.config) runs the check; so
do `mimesis params check` and the Prefect pipeline's first step. The stages' settings classes
(SFTSettings, ServeSettings, ...) still build themselves from the checked dict.

Blocks passed through to another library (a TRL `trainer:` block, a coach's `coach_options`) are
typed maps here; the stage checks their keys against that library's config class.

Adding a knob: add the field to its settings class and to its model here (tests/unit/test_params.py
fails while the two disagree). This module is the one place params.yaml's shape is written down; the
per-stage settings classes may later be built from these models instead of from the raw dict.
"""

from __future__ import annotations

import copy
import difflib
import math
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Required, Union, get_args, get_origin, get_type_hints

from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict, is_typeddict

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
    generation: Sampling


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
    labeler: LabelerName
    discriminator: Discriminator


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
    per_domain: PosInt
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


@with_config(TRL_SECTIONS)
class AgentRLCommon(TypedDict, total=False):
    user: str
    sft_dir: str
    base_model: str
    domains: list[str] | None
    prompts_per_domain: PosInt
    max_turns: PosInt | None
    turn_cost: NonNegFloat
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
    pipeline: Pipeline
    tracking: Tracking


@with_config(STRICT)
class ParamsFile(Sections, total=False):
    """The whole file: defaults, the active profile's name, the overlays."""

    profile: str
    profiles: dict[str, Sections | None]


SECTIONS: tuple[str, ...] = tuple(k for k in Sections.__annotations__ if k != "seed")
_FILE = TypeAdapter(ParamsFile)
_SECTIONS = TypeAdapter(Sections)


class ParamsError(ValueError):
    """params.yaml is malformed; `problems` lists each one as `file: key.path: what`."""

    def __init__(self, path: str | Path, problems: list[str]) -> None:
        self.path, self.problems = str(path), problems
        shown = "\n  ".join(problems)
        super().__init__(problems[0] if len(problems) == 1 else
                         f"params check failed ({len(problems)} problems):\n  {shown}")


def _loc(prefix: str, loc: tuple[Any, ...]) -> str:
    parts = [prefix] if prefix else []
    parts += [f"[{p}]" if isinstance(p, int) else str(p) for p in loc]
    return ".".join(parts).replace(".[", "[")


def _did_you_mean(key: str, known: Any) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


def _members(tp: Any) -> list[Any]:
    """The types a field may hold: Annotated and unions unwrapped."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _members(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]


def _known_keys(root: Any, loc: tuple[Any, ...]) -> list[str]:
    """The keys the schema knows where `loc` points (its parent mapping), for a "did you mean"."""
    tp: Any = root
    for part in loc[:-1]:
        step = None
        for member in _members(tp):
            if is_typeddict(member) and isinstance(part, str):
                step = get_type_hints(member).get(part)
            elif get_origin(member) is dict and isinstance(part, str):
                step = get_args(member)[1]
            elif get_origin(member) is list and isinstance(part, int):
                step = get_args(member)[0]
            if step is not None:
                break
        if step is None:
            return []
        tp = step
    return sorted({k for m in _members(tp) if is_typeddict(m) for k in get_type_hints(m)})


def _problems(exc: ValidationError, prefix: str = "", root: Any = None) -> list[str]:
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        # pydantic names the union member it tried (`str`, `list[...]`): drop such type names
        loc = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in _TYPE_NAMES)))
        where = _loc(prefix, loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            out.append(f"{where}: unknown key{_did_you_mean(str(loc[-1]), _known_keys(root, loc))}")
        else:
            given = err.get("input")
            hint = ""
            if isinstance(given, str) and _looks_numeric(given):
                hint = " (quoted, or YAML 1.1 read it as text: write 1.0e-3, not 1e-3)"
            shown = "" if any(str(p) in SECRET_KEYS for p in loc) else f" (got {given!r})"  # never echo a key
            out.append(f"{where}: {err['msg']}{shown}{hint}"[:300])
    return sorted(set(out))


SECRET_KEYS = frozenset({"api_keys", "api_key"})


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_TYPE_NAMES = {"str", "int", "float", "bool", "none", "literal", "function-after", "constrained-float",
               "constrained-int", "constrained-str", "dict", "list", "tuple"}


TRL_ALIASES = {"batch_size": "per_device_train_batch_size", "grad_accum": "gradient_accumulation_steps"}
_TRL_FIELDS: dict[str, set[str] | None] = {}


def _trl_fields(config: str) -> set[str] | None:
    """Field names of trl.<config> (SFTConfig, GRPOConfig); None when TRL cannot be imported."""
    if config not in _TRL_FIELDS:
        try:
            import dataclasses

            import trl

            _TRL_FIELDS[config] = {f.name for f in dataclasses.fields(getattr(trl, config))}
        except Exception:  # noqa: BLE001 - no TRL here: such keys cannot be checked, so they are refused
            _TRL_FIELDS[config] = None
    return _TRL_FIELDS[config]


def _trl_blocks(params: Mapping[str, Any]) -> list[tuple[str, Any, type, str]]:
    """(where, block, schema model, TRL config) of every section whose TRL fields pass through."""
    out: list[tuple[str, Any, type, str]] = [
        ("sim_sft", params.get("sim_sft"), SimSFT, "SFTConfig"),
        ("sim_rl", params.get("sim_rl"), SimRL, "GRPOConfig"),
        ("agent_sft", params.get("agent_sft"), AgentSFT, "SFTConfig"),
        ("agent_rl", params.get("agent_rl"), AgentRL, "GRPOConfig")]
    agent_rl = params.get("agent_rl")
    variants = agent_rl.get("variants") if isinstance(agent_rl, Mapping) else None
    if isinstance(variants, Mapping):
        out += [(f"agent_rl.variants.{name}", block, AgentRLVariant, "GRPOConfig")
                for name, block in variants.items()]
    return out


def _trl_extras(params: Mapping[str, Any], pre: str) -> list[str]:
    """Top-level keys of a training section that the schema does not name must be TRL fields."""
    out = []
    for section, block, model, config in _trl_blocks(params):
        if not isinstance(block, Mapping):
            continue
        extra = [k for k in block if k not in model.__annotations__ and k not in Training.__annotations__]
        if not extra:
            continue
        fields = _trl_fields(config) or set()
        for key in extra:
            if TRL_ALIASES.get(key, key) not in fields:
                known = {*model.__annotations__, *Training.__annotations__, *fields, *TRL_ALIASES}
                out.append(f"{pre}{section}.{key}: unknown key (not a {section} key "
                           f"nor a TRL {config} field){_did_you_mean(key, known)}")
    return out


def _sim_sft_keys(sim_sft: Mapping[str, Any]) -> set[str]:
    """Keys `sim_panel` may lay over `sim_sft`: its fields and the keys of its nested blocks."""
    keys = set(SimSFT.__annotations__) | set(Training.__annotations__)
    for value in sim_sft.values():
        if isinstance(value, Mapping):
            keys |= set(value)
    for block in (Lora, Leave, EnvDialogues, Sampling):
        keys |= set(block.__annotations__)
    return keys


def _cross_checks(params: Mapping[str, Any], where: str) -> list[str]:
    """What one key's type cannot say: fractions summing to 1, min <= max, panel keys."""
    out: list[str] = []
    pre = f"{where}." if where else ""
    fractions = (params.get("split") or {}).get("fractions")
    if isinstance(fractions, Mapping):
        if "train" not in fractions:
            out.append(f"{pre}split.fractions: needs a `train` share (got {dict(fractions)})")
        total = sum(v for v in fractions.values() if isinstance(v, int | float))
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            out.append(f"{pre}split.fractions: must sum to 1, got {total:.6g} from {dict(fractions)}")
    v = params.get("validate") or {}
    for low, high in (("min_chars", "max_chars"), ("min_turns", "max_turns")):
        a, b = v.get(low), v.get(high)
        if isinstance(a, int) and isinstance(b, int) and a > b:
            out.append(f"{pre}validate.{low}: {a} is above validate.{high} ({b})")
    out += _trl_extras(params, pre)
    panel = params.get("sim_panel") or {}
    if isinstance(panel, Mapping):
        known = _sim_sft_keys(params.get("sim_sft") or {}) | {"members"}
        member_keys = set(PanelMember.__annotations__) | known | {"output_dir"}
        members = panel.get("members") or {}
        laid = [(f"sim_panel.{k}", k) for k in panel if k not in known]
        laid += [(f"sim_panel.members.{n}.{k}", k) for n, m in members.items() if isinstance(m, Mapping)
                 for k in m if k not in member_keys]
        fields = (_trl_fields("SFTConfig") or set()) if laid else set()
        for where, key in laid:  # a key that is neither goes to sim_sft's top level: a TRL field there
            if TRL_ALIASES.get(key, key) not in fields:
                hint = _did_you_mean(key, member_keys | fields | set(TRL_ALIASES))
                out.append(f"{pre}{where}: unknown key (not a sim_sft key nor a TRL SFTConfig field){hint}")
    return out


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` laid over `base`, mappings merged key by key: how a profile applies to the defaults."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def check_raw(raw: Any, path: str | Path = "params.yaml", complete: bool = True) -> list[str]:
    """Every problem of a parsed params file (defaults, overlays, each merged profile); [] = fine.

    complete: every section must be present (`mimesis params check`); a stage asks only for its own
    (tests and scratch checkouts carry a few sections)."""
    if not isinstance(raw, Mapping):
        return [f"(top level): the file must hold a mapping of sections, got {type(raw).__name__}"]
    problems: list[str] = []
    try:
        _FILE.validate_python(raw)
    except ValidationError as exc:
        problems += _problems(exc, root=ParamsFile)
    missing = [s for s in SECTIONS if s not in raw]
    if missing and complete:
        problems.append(f"(top level): missing section(s) {', '.join(missing)}")
    profiles = raw.get("profiles") or {}
    defaults = {k: v for k, v in raw.items() if k not in ("profiles", "profile")}
    problems += _cross_checks(defaults, "")
    if isinstance(profiles, Mapping):
        name = raw.get("profile", "demo")
        if isinstance(name, str) and profiles and name not in profiles:
            problems.append(f"profile: unknown profile {name!r}; known: {', '.join(sorted(profiles))}")
        for name, overlay in profiles.items():
            if isinstance(overlay, Mapping) and not problems:
                merged = deep_merge(defaults, dict(overlay))
                try:
                    _SECTIONS.validate_python(merged)
                except ValidationError as exc:
                    problems += _problems(exc, f"profiles.{name} (merged)", root=Sections)
                problems += _cross_checks(merged, f"profiles.{name} (merged)")
    return [f"{path}: {p}" for p in problems]


def read_raw(path: str | Path) -> dict[str, Any]:
    """The parsed file, or a ParamsError naming the file (and the line of a YAML syntax error)."""
    import yaml

    from mimesis_rl.fsutil import PathError, check_input_file

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(f"{path}: params file not found (run from the project root)")
    try:
        check_input_file(path, "params file")
    except PathError as exc:
        raise ParamsError(path, [str(exc)]) from None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ParamsError(path, [f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    if not text.strip():
        raise ParamsError(path, [f"{path}: the file is empty (expected the params sections)"])
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParamsError(path, [f"{path}: {at}YAML syntax error: {what}"]) from None
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        raise ParamsError(path, [f"{path}: the file must hold a mapping of sections, got {kind}"])
    return raw


def check_params(path: str | Path, complete: bool = True) -> dict[str, Any]:
    """Read and check params.yaml; returns the raw mapping or raises ParamsError listing every problem."""
    raw = read_raw(path)
    problems = check_raw(raw, path, complete=complete)
    if problems:
        raise ParamsError(path, problems)
    return raw
