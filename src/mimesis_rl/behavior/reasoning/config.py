"""The `rationalize:` section of params.yaml as typed settings, and the backend they build.

Built through mimesis_rl.settings.from_section: an unknown key is an error naming its key path, so a
typo never passes silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.behavior.reasoning.base import BatchRationalizer
from mimesis_rl.behavior.reasoning.checks import DEFAULT_MAX_OVERLAP
from mimesis_rl.behavior.reasoning.template import TemplateRationalizer
from mimesis_rl.settings import from_section

BACKENDS = ("template", "model", "llm")


@dataclass(frozen=True)
class TemplateSettings:
    """persona_rate: share of traces with a persona sentence; withheld_rate: share that mention a
    private slot kept back when no pattern asks for it."""

    persona_rate: float = 0.35
    withheld_rate: float = 0.3


@dataclass(frozen=True)
class ModelSettings:
    """The base model prompted for reasoning (`rationalize.model`); see `ModelRationalizer`."""

    path: str = "models/base"
    batch_size: int = 8
    max_new_tokens: int = 64
    do_sample: bool = True
    temperature: float = 0.7
    top_p: float = 0.9
    max_prompt_tokens: int = 768
    min_words: int = 3


@dataclass(frozen=True)
class LLMSettings:
    """An OpenAI-compatible endpoint (`rationalize.llm`): names of env variables, or literal values."""

    base_url_env: str = "OPENAI_BASE_URL"
    model_env: str = "OPENAI_MODEL"
    api_key_env: str = "OPENAI_API_KEY"
    base_url: str | None = None
    model: str | None = None
    timeout_s: float = 30.0
    max_retries: int = 3
    backoff_s: float = 1.0
    concurrency: int = 4
    temperature: float = 0.7
    max_tokens: int = 120
    min_words: int = 3


@dataclass(frozen=True)
class RationalizeSettings:
    """What the `rationalize` stage reads, writes and with which backend.

    Data:
        input_dir: labelled splits (`<split>.jsonl`); output_dir: the same splits with reasoning.
        report_dir: the Great Expectations result of each written split.
        splits: which split files to process; chunk_size: conversations handed to the backend at once.
    Backend:
        backend: `template`, `model` or `llm`; max_overlap: the repetition check's token-overlap
        limit; keep_existing: keep a valid trace a corpus already ships.
    """

    input_dir: str = "data/processed/labeled"
    output_dir: str = "data/processed/conversations"
    report_dir: str = "reports/rationalize"
    splits: tuple[str, ...] = ("train", "val", "test")
    chunk_size: int = 256
    backend: str = "template"
    max_overlap: float = DEFAULT_MAX_OVERLAP
    keep_existing: bool = True
    template: TemplateSettings = field(default_factory=TemplateSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"rationalize.backend: {self.backend!r} is not one of {BACKENDS}")
        if not 0.0 < self.max_overlap <= 1.0:
            raise ValueError(f"rationalize.max_overlap must be in (0, 1], got {self.max_overlap}")
        if self.chunk_size < 1:
            raise ValueError(f"rationalize.chunk_size must be at least 1, got {self.chunk_size}")
        if isinstance(self.splits, list):
            object.__setattr__(self, "splits", tuple(self.splits))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RationalizeSettings:
        section = dict(params.get("rationalize") or {})
        nested = {
            "template": from_section(TemplateSettings, section.pop("template", None), "rationalize.template"),
            "model": from_section(ModelSettings, section.pop("model", None), "rationalize.model"),
            "llm": from_section(LLMSettings, section.pop("llm", None), "rationalize.llm"),
        }
        return from_section(cls, section, "rationalize", **nested)


ModelLoader = Callable[[str], tuple[Any, Any]]  # a model folder -> (model, tokenizer), left-padded


def build_rationalizer(config: RationalizeSettings, seed: int = 0,
                       load_model: ModelLoader | None = None) -> BatchRationalizer:
    """The configured backend, with the template backend as its fallback.

    The `model` backend needs `load_model` (the stage passes `models.loading.load_base`): behaviour sits
    below the models layer, so it is handed a loader rather than importing one."""
    settings = config.template
    template = TemplateRationalizer(
        seed=seed, max_overlap=config.max_overlap, keep_existing=config.keep_existing,
        persona_rate=settings.persona_rate, withheld_rate=settings.withheld_rate)
    if config.backend == "template":
        return template
    if config.backend == "model":
        from mimesis_rl.behavior.reasoning.model import ModelRationalizer

        if load_model is None:
            raise ValueError("rationalize.backend 'model' needs a model loader (build_rationalizer(..., "
                             "load_model=...); the rationalize stage passes models.loading.load_base)")
        m = config.model
        model, tokenizer = load_model(m.path)
        return ModelRationalizer(
            model, tokenizer, fallback=template, batch_size=m.batch_size, max_new_tokens=m.max_new_tokens,
            do_sample=m.do_sample, temperature=m.temperature, top_p=m.top_p,
            max_prompt_tokens=m.max_prompt_tokens, seed=seed, max_overlap=config.max_overlap,
            keep_existing=config.keep_existing, min_words=m.min_words)
    from mimesis_rl.behavior.openai_client import ChatClient, ChatClientSettings
    from mimesis_rl.behavior.reasoning.llm import LLMRationalizer

    llm = config.llm
    client = ChatClient(ChatClientSettings.from_section(dataclasses.asdict(llm), "rationalize.llm"))
    return LLMRationalizer(
        client, fallback=template, concurrency=llm.concurrency, temperature=llm.temperature,
        max_tokens=llm.max_tokens, max_overlap=config.max_overlap, keep_existing=config.keep_existing,
        min_words=llm.min_words)
