"""LoRA adapters over one shared frozen base: build them from typed settings, load several named
ones (e.g. `agent` and `simulator`) onto the same base weights, and switch between them.

The rollout engine keeps one base model in memory and flips the active adapter per turn
(`with active_adapter(model, "simulator"): ...`); a frozen adapter stays frozen when it is active.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from peft import LoraConfig, PeftModel, get_peft_model
from transformers import PreTrainedModel

from mimesis_rl.models.config import LoraSettings


def peft_lora_config(settings: LoraSettings) -> LoraConfig:
    targets = settings.target_modules
    return LoraConfig(
        r=settings.r,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=targets if isinstance(targets, str) else list(targets),
        bias=settings.bias,
        task_type="CAUSAL_LM",
    )


def attach_lora(model: PreTrainedModel | PeftModel, settings: LoraSettings,
                adapter_name: str = "default") -> PeftModel:
    """A new trainable adapter; on a PeftModel it is added beside the adapters already there."""
    config = peft_lora_config(settings)
    if isinstance(model, PeftModel):
        if adapter_name in model.peft_config:
            raise ValueError(f"adapter {adapter_name!r} already exists (have: {sorted(model.peft_config)})")
        model.add_adapter(adapter_name, config)
        model.set_adapter(adapter_name)
        return model
    return get_peft_model(model, config, adapter_name=adapter_name)


def load_adapters(base: PreTrainedModel | PeftModel, adapters: Mapping[str, str | Path],
                  trainable: Collection[str] = ()) -> PeftModel:
    """Load named adapters onto ONE base; those not in `trainable` are frozen. The first is active."""
    if not adapters:
        raise ValueError("load_adapters: no adapters given")
    unknown = set(trainable) - set(adapters)
    if unknown:
        raise ValueError(f"trainable adapters {sorted(unknown)} are not among {sorted(adapters)}")
    for name, path in adapters.items():
        if not (Path(path) / "adapter_config.json").exists():
            raise FileNotFoundError(f"adapter {name!r}: {path} has no adapter_config.json")
    items = list(adapters.items())
    model = base
    if not isinstance(model, PeftModel):
        name, path = items.pop(0)
        model = PeftModel.from_pretrained(base, str(path), adapter_name=name, is_trainable=name in trainable)
    for name, path in items:
        model.load_adapter(str(path), adapter_name=name, is_trainable=name in trainable)
    first = next(iter(adapters))
    model.set_adapter(first, inference_mode=first not in trainable)
    return model


def adapter_is_trainable(model: PeftModel, name: str) -> bool:
    marker = f".{name}."
    return any(p.requires_grad for n, p in model.named_parameters() if marker in n)


def switch_adapter(model: PeftModel, name: str, trainable: bool = False) -> None:
    """Make `name` the active adapter; it gets gradients only when `trainable` (all others are frozen)."""
    if name not in model.peft_config:
        raise KeyError(f"no adapter {name!r}; loaded: {sorted(model.peft_config)}")
    model.set_adapter(name, inference_mode=not trainable)


@contextmanager
def active_adapter(model: PeftModel, name: str, trainable: bool = False) -> Iterator[PeftModel]:
    """Run a block with `name` active, then restore the previous adapter and its trainability."""
    previous = model.active_adapter
    was_trainable = adapter_is_trainable(model, previous)
    switch_adapter(model, name, trainable=trainable)
    try:
        yield model
    finally:
        switch_adapter(model, previous, trainable=was_trainable)


def save_adapter(model: PeftModel, name: str, output_dir: str | Path) -> Path:
    """Save one adapter's weights and config straight into `output_dir` (peft nests non-default names)."""
    output_dir = Path(output_dir)
    with tempfile.TemporaryDirectory(prefix="mimesis-adapter-") as tmp:
        model.save_pretrained(tmp, selected_adapters=[name])
        src = Path(tmp) if name == "default" else Path(tmp) / name
        output_dir.mkdir(parents=True, exist_ok=True)
        for item in src.iterdir():
            if item.is_file():
                shutil.copy2(item, output_dir / item.name)
    return output_dir
