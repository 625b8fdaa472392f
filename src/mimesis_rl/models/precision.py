"""The one device/precision switch: CPU when there is no GPU, bf16 on CUDA, and on CPU the dtype
that `benchmarks/precision.py` measured best (params.yaml `models.cpu_dtype`)."""

from __future__ import annotations

from typing import Any

import torch

from mimesis_rl.models.config import PrecisionConfig


def device_and_dtype(pref: PrecisionConfig | str = "auto", cpu_dtype: str | None = None,
                     cuda_dtype: str | None = None) -> tuple[torch.device, torch.dtype]:
    """Resolve a device preference (`auto`, `cpu`, `cuda[:N]`, or a PrecisionConfig) to (device, dtype)."""
    config = pref if isinstance(pref, PrecisionConfig) else PrecisionConfig(device=pref)
    cpu = cpu_dtype or config.cpu_dtype
    cuda = cuda_dtype or config.cuda_dtype
    wanted = config.device
    if wanted == "auto":
        wanted = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(wanted)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"models.device={config.device!r} but no CUDA device is available")
    name = cuda if device.type == "cuda" else cpu
    if device.type == "cuda" and name == "bfloat16" and not torch.cuda.is_bf16_supported():
        name = "float16"
    return device, getattr(torch, name)


def trainer_precision_kwargs(device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    """`TrainingArguments` keywords for the resolved switch (mixed precision over fp32 master weights)."""
    return {
        "use_cpu": device.type == "cpu",
        "bf16": dtype == torch.bfloat16,
        "fp16": dtype == torch.float16,
    }
