"""Two LoRA adapters over ONE shared base: load, switch, freeze, and save/reload round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mimesis_rl.models import (
    LoraSettings,
    active_adapter,
    attach_lora,
    load_adapters,
    load_base,
    save_adapter,
    switch_adapter,
)
from mimesis_rl.models.lora import adapter_is_trainable
from mimesis_rl.models.testing import make_tiny_base

SETTINGS = LoraSettings(r=4, alpha=8, dropout=0.0, target_modules=("q_proj", "v_proj"))


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_base(tmp_path_factory.mktemp("tiny") / "base")


def _make_adapter(base_dir: Path, out: Path, seed: int) -> Path:
    """A LoRA adapter with non-zero B (a fresh one is an exact no-op), saved to `out`."""
    model, _ = load_base(base_dir, device="cpu")
    peft_model = attach_lora(model, SETTINGS)
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    return save_adapter(peft_model, "default", out)


@pytest.fixture(scope="module")
def adapters(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adapters")
    return {"agent": _make_adapter(tiny_dir, root / "agent", 1),
            "simulator": _make_adapter(tiny_dir, root / "simulator", 2)}


def _logits(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model(**batch).logits


def test_two_adapters_one_base_switching(tiny_dir: Path, adapters: dict[str, Path]) -> None:
    base, tokenizer = load_base(tiny_dir, device="cpu")
    batch = tokenizer(["I want a cheaper hotel"], return_tensors="pt")
    plain = _logits(base, batch)
    base_params = sum(p.numel() for p in base.parameters())
    model = load_adapters(base, adapters, trainable=["agent"])

    assert sorted(model.peft_config) == ["agent", "simulator"]
    # One base: the adapters add only their LoRA matrices, the base weights exist once.
    lora_params = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    assert sum(p.numel() for p in model.parameters()) == base_params + lora_params
    assert model.active_adapter == "agent"
    agent = _logits(model, batch)
    switch_adapter(model, "simulator")
    simulator = _logits(model, batch)
    with model.disable_adapter():
        disabled = _logits(model, batch)

    assert not torch.allclose(agent, simulator, atol=1e-4)
    assert not torch.allclose(agent, plain, atol=1e-4)
    assert torch.allclose(disabled, plain, atol=1e-6)
    switch_adapter(model, "agent", trainable=True)
    assert torch.allclose(_logits(model, batch), agent, atol=1e-6)


def test_active_adapter_restores_and_keeps_frozen_adapter_frozen(tiny_dir: Path,
                                                                 adapters: dict[str, Path]) -> None:
    base, tokenizer = load_base(tiny_dir, device="cpu")
    model = load_adapters(base, adapters, trainable=["agent"])
    switch_adapter(model, "agent", trainable=True)
    assert adapter_is_trainable(model, "agent") and not adapter_is_trainable(model, "simulator")
    with active_adapter(model, "simulator"):
        assert model.active_adapter == "simulator"
        assert not adapter_is_trainable(model, "simulator")
    assert model.active_adapter == "agent"
    assert adapter_is_trainable(model, "agent") and not adapter_is_trainable(model, "simulator")
    # Base weights are never trainable.
    assert not any(p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)


def test_attach_second_adapter_and_save_reload(tiny_dir: Path, adapters: dict[str, Path],
                                               tmp_path: Path) -> None:
    base, tokenizer = load_base(tiny_dir, device="cpu")
    batch = tokenizer(["hello"], return_tensors="pt")
    model = load_adapters(base, {"simulator": adapters["simulator"]})
    model = attach_lora(model, SETTINGS, adapter_name="agent")
    assert model.active_adapter == "agent" and adapter_is_trainable(model, "agent")
    with pytest.raises(ValueError, match="already exists"):
        attach_lora(model, SETTINGS, adapter_name="agent")
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B.agent" in name:
                param.fill_(0.1)
    expected = _logits(model, batch)
    saved = save_adapter(model, "agent", tmp_path / "agent")
    assert (saved / "adapter_config.json").exists()

    fresh, _ = load_base(tiny_dir, device="cpu")
    reloaded = load_adapters(fresh, {"agent": saved})
    assert torch.allclose(_logits(reloaded, batch), expected, atol=1e-6)


def test_errors_name_the_problem(tiny_dir: Path, adapters: dict[str, Path], tmp_path: Path) -> None:
    base, _ = load_base(tiny_dir, device="cpu")
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        load_adapters(base, {"agent": tmp_path})
    with pytest.raises(ValueError, match="not among"):
        load_adapters(base, adapters, trainable=["coach"])
    model = load_adapters(base, adapters)
    with pytest.raises(KeyError, match="no adapter 'coach'"):
        switch_adapter(model, "coach")


def test_lora_settings_from_section() -> None:
    settings = LoraSettings.from_section({"r": 16, "alpha": 32, "target_modules": ["q_proj"]})
    assert settings.target_modules == ("q_proj",)
    with pytest.raises(ValueError, match="unknown key"):
        LoraSettings.from_section({"rank": 4})
