"""The one device/precision switch: CPU when there is no GPU, bf16 on CUDA, and on CPU the dtype
that `benchmarks/precision.py` measured best (params.yaml `models.cpu_dtype`; `auto` = bf16 where the
CPU has native bf16 matmuls, AVX512-BF16 or AMX, fp32 elsewhere).
torch's thread count is set in `mimesis_rl.threads` (torch-free, so stages without a model skip torch)."""

from __future__ import annotations

from typing import Any

import torch

from mimesis_rl.models.config import PrecisionSettings


def device_and_dtype(pref: PrecisionSettings | str = "auto", cpu_dtype: str | None = None,
                     cuda_dtype: str | None = None) -> tuple[torch.device, torch.dtype]:
    """Resolve a device preference (`auto`, `cpu`, `cuda[:N]`, or a PrecisionSettings) to (device, dtype)."""
    config = pref if isinstance(pref, PrecisionSettings) else PrecisionSettings(device=pref)
    cpu = cpu_dtype or config.cpu_dtype
    cuda = cuda_dtype or config.cuda_dtype
    wanted = config.device
    if wanted == "auto":
        wanted = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(wanted)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"models.device={config.device!r} but no CUDA device is available")
    name = cuda if device.type == "cuda" else resolve_cpu_dtype(cpu)
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


def cpu_has_bf16() -> bool:
    """Native bf16 matmuls (AVX512-BF16 or AMX): bf16 then beat fp32 2.5x for training on both CPUs we
    meet; without them bf16 is emulated and slower than fp32."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, probe, lambda: False)()) for probe in probes)


def resolve_cpu_dtype(name: str) -> str:
    """`auto` -> `bfloat16` on a CPU with native bf16, else `float32`; any other name unchanged."""
    if name != "auto":
        return name
    return "bfloat16" if cpu_has_bf16() else "float32"
