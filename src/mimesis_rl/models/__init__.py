"""Base-model acquisition and loading, LoRA adapters, the device/precision switch."""

from mimesis_rl.models.acquire import BuildResult, acquire_smollm2, build_base, build_tiny
from mimesis_rl.models.config import BaseModelSettings, LoraSettings, PrecisionSettings, TinySettings
from mimesis_rl.models.loading import load_base, load_tokenizer
from mimesis_rl.models.lora import active_adapter, attach_lora, load_adapters, save_adapter, switch_adapter
from mimesis_rl.models.manifest import read_manifest
from mimesis_rl.models.precision import device_and_dtype, trainer_precision_kwargs

__all__ = [
    "BaseModelSettings", "BuildResult", "LoraSettings", "PrecisionSettings", "TinySettings",
    "acquire_smollm2",
    "active_adapter", "attach_lora", "build_base", "build_tiny", "device_and_dtype", "load_adapters",
    "load_base", "load_tokenizer", "read_manifest", "save_adapter", "switch_adapter",
    "trainer_precision_kwargs",
]
