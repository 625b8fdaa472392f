"""Loading what a trainer trains: a base model in the training precision, a LoRA adapter over it
made trainable (with frozen sibling adapters beside it, e.g. the agent's KL reference), or a fully
fine-tuned model trained on as a whole."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch


def load_base_model(path: str | Path, bf16: bool) -> Any:
    """The base causal LM in bf16 (under a LoRA adapter: the fast CPU path) or fp32."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16 if bf16 else torch.float32)


def load_trainable_model(folder: str | Path, grouped_attention: bool = False) -> Any:
    """A fully fine-tuned model (`method: full`), trainable as a whole: fp32 master weights (bf16 autocast
    computes; the updates are too small for bf16 weights). `grouped_attention`: as for an adapter."""
    model = load_base_model(folder, bf16=False)
    if grouped_attention:
        from mimesis_rl.models.inference.attention import use_grouped_attention

        use_grouped_attention(model)
    return model


def load_trainable_adapter(base_model: str | Path, adapter: str | Path, bf16: bool,
                           frozen: Mapping[str, str | Path] | None = None,
                           grouped_attention: bool = False) -> Any:
    """A PeftModel whose adapter `default` (from `adapter`) trains; `frozen` adapters (name -> folder)
    are loaded beside it and never train. `grouped_attention` keeps the KV heads grouped on padded
    batches (GRPO generates them; same numbers)."""
    from peft import PeftModel

    from mimesis_rl.models.lora import switch_adapter

    base = load_base_model(base_model, bf16)
    if grouped_attention:
        from mimesis_rl.models.inference.attention import use_grouped_attention

        use_grouped_attention(base)
    model = PeftModel.from_pretrained(base, str(adapter), adapter_name="default", is_trainable=True)
    for name, folder in (frozen or {}).items():
        model.load_adapter(str(folder), adapter_name=name, is_trainable=False)
    if frozen:
        switch_adapter(model, "default", trainable=True)
    return model
