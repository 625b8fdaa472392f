"""Load a saved base model (ours, or any local transformers folder) onto the chosen device/dtype."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from mimesis_rl.models.config import PrecisionSettings
from mimesis_rl.models.precision import device_and_dtype

__all__ = ["device_and_dtype", "load_base", "load_tokenizer"]


def load_tokenizer(path: str | Path, padding_side: str = "right") -> PreTrainedTokenizerBase:
    """The base's tokenizer; a pad token is guaranteed (eos when the folder names none)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: base model folder not found (run `python -m tasks.base_model`)")
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = padding_side
    return tokenizer


def load_base(path: str | Path, dtype: torch.dtype | str | None = None,
              device: torch.device | str | PrecisionSettings | None = None,
              padding_side: str = "right") -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """(model in eval mode, tokenizer) on the device/dtype of the precision switch.

    Pass `device=PrecisionSettings.from_params(params)` to follow params.yaml `models:`; a plain string
    device uses the code defaults (fp32 on CPU); an explicit `dtype` wins over both.
    Use `padding_side="left"` for batched generation.
    """
    tokenizer = load_tokenizer(path, padding_side)
    resolved_device, resolved_dtype = device_and_dtype(
        device if isinstance(device, PrecisionSettings) else PrecisionSettings(device=str(device or "auto")))
    if dtype is not None:
        resolved_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    model = AutoModelForCausalLM.from_pretrained(Path(path), dtype=resolved_dtype)
    model.to(resolved_device)
    model.eval()
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
