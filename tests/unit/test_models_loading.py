"""Loading a base and the one device/precision switch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mimesis_rl.models import PrecisionSettings, device_and_dtype, load_base, trainer_precision_kwargs
from mimesis_rl.models.precision import cpu_has_bf16, resolve_cpu_dtype
from mimesis_rl.models.smoke import smoke_generate
from mimesis_rl.models.testing import make_tiny_base
from mimesis_rl.threads import set_threads


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_base(tmp_path_factory.mktemp("tiny") / "base")


def test_cpu_uses_the_configured_dtype() -> None:
    native = torch.bfloat16 if cpu_has_bf16() else torch.float32  # `auto`, the default
    assert device_and_dtype("cpu") == (torch.device("cpu"), native)
    assert resolve_cpu_dtype("float32") == "float32"
    assert device_and_dtype(PrecisionSettings(device="cpu", cpu_dtype="bfloat16")) == (torch.device("cpu"),
                                                                                     torch.bfloat16)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU branch")
def test_auto_without_gpu_is_cpu() -> None:
    device, dtype = device_and_dtype("auto", cpu_dtype="bfloat16")
    assert device.type == "cpu" and dtype == torch.bfloat16
    with pytest.raises(RuntimeError, match="no CUDA"):
        device_and_dtype("cuda")


def test_trainer_kwargs() -> None:
    assert trainer_precision_kwargs(torch.device("cpu"), torch.float32) == {"use_cpu": True, "bf16": False,
                                                                            "fp16": False}
    assert trainer_precision_kwargs(torch.device("cpu"), torch.bfloat16)["bf16"] is True


def test_precision_config_from_params() -> None:
    assert PrecisionSettings.from_params({}) == PrecisionSettings()
    assert PrecisionSettings.from_params({"models": {"cpu_dtype": "bfloat16"}}).cpu_dtype == "bfloat16"
    with pytest.raises(ValueError, match="cpu_dtype"):
        PrecisionSettings(cpu_dtype="int8")


def test_load_base_dtype_and_padding(tiny_dir: Path) -> None:
    model, tokenizer = load_base(tiny_dir, dtype="bfloat16", device="cpu", padding_side="left")
    assert model.dtype == torch.bfloat16 and not model.training
    assert tokenizer.padding_side == "left"
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id


def test_load_base_follows_the_precision_config(tiny_dir: Path) -> None:
    config = PrecisionSettings(device="cpu", cpu_dtype="bfloat16")
    model, _ = load_base(tiny_dir, device=config)
    assert model.dtype == torch.bfloat16 and model.device.type == "cpu"
    model, _ = load_base(tiny_dir, device=config, dtype="float32")
    assert model.dtype == torch.float32


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="base model folder not found"):
        load_base(tmp_path / "nope")


def test_smoke_generation_runs(tiny_dir: Path) -> None:
    model, tokenizer = load_base(tiny_dir, device="cpu")
    result = smoke_generate(model, tokenizer, max_new_tokens=5)
    assert 1 <= result["new_tokens"] <= 5
    assert result["prompt_tokens"] > 5


def test_set_threads_is_explicit_and_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("MIMESIS_THREADS", "2")
        assert set_threads() == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
