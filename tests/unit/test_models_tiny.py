"""The tiny base builder: tokenizer, chat template with TRL generation markers, forward pass, manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from trl.chat_template_utils import (
    has_generation_markers,
    is_chat_template_prefix_preserving,
    is_chat_template_stop_token_trained,
)

from mimesis_rl.models import (
    BaseModelSettings,
    TinySettings,
    build_base,
    build_tiny,
    load_base,
    read_manifest,
)
from mimesis_rl.models.acquire import corpus_texts
from mimesis_rl.models.chat_template import END_OF_TURN, chatml_template
from mimesis_rl.models.testing import SAMPLE_TEXTS, TINY_TEST_CONFIG, make_tiny_base

CHAT = [
    {"role": "system", "content": "You are a hotel guest."},
    {"role": "user", "content": "Do you have rooms?"},
    {"role": "assistant", "content": "Yes, two doubles."},
    {"role": "user", "content": "Too expensive."},
    {"role": "assistant", "content": "I can offer a discount."},
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_base(tmp_path_factory.mktemp("tiny") / "base")


def test_folder_has_weights_tokenizer_template_and_manifest(tiny_dir: Path) -> None:
    names = {p.name for p in tiny_dir.iterdir()}
    assert {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
            "mimesis_base.json"} <= names
    manifest = read_manifest(tiny_dir)
    assert manifest["kind"] == "tiny"
    assert manifest["dtype"] == "float32"
    assert manifest["param_count"] > 0
    assert len(manifest["corpus_sha256"]) == 64
    model, tokenizer = load_base(tiny_dir, device="cpu")
    assert manifest["vocab_size"] == len(tokenizer) == model.config.vocab_size
    assert manifest["param_count"] == sum(p.numel() for p in model.parameters())
    assert not list(tiny_dir.parent.glob(".base.*")), "temporary build folder left behind"


def test_special_tokens_share_smollm2_ids(tiny_dir: Path) -> None:
    _, tokenizer = load_base(tiny_dir, device="cpu")
    assert tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [0, 1, 2]
    assert tokenizer.eos_token == END_OF_TURN
    assert tokenizer.pad_token_id is not None and tokenizer.pad_token_id != tokenizer.eos_token_id
    # Byte-level: text never seen in training (accents, emoji) round-trips exactly, no BOS is prepended.
    text = "Ünïcode 🙂 and\ttabs\n"
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert ids[0] != tokenizer.bos_token_id


def test_forward_pass_and_loss(tiny_dir: Path) -> None:
    model, tokenizer = load_base(tiny_dir, device="cpu")
    batch = tokenizer(["hello there", "a longer sentence about hotels"], return_tensors="pt", padding=True)
    out = model(**batch, labels=batch["input_ids"])
    assert out.logits.shape == (*batch["input_ids"].shape, len(tokenizer))
    assert torch.isfinite(out.loss)
    # Random init: loss is close to uniform cross-entropy ln(V).
    assert abs(out.loss.item() - torch.log(torch.tensor(float(len(tokenizer)))).item()) < 1.0


def test_chat_template_marks_assistant_tokens_for_trl(tiny_dir: Path) -> None:
    _, tokenizer = load_base(tiny_dir, device="cpu")
    assert has_generation_markers(tokenizer.chat_template)
    assert is_chat_template_stop_token_trained(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)
    out = tokenizer.apply_chat_template(CHAT, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    masked = [tok for tok, keep in zip(out["input_ids"], out["assistant_masks"], strict=True) if keep]
    # Exactly the two assistant contents, each with the end-of-turn token that teaches the model to stop.
    assert tokenizer.decode(masked) == "Yes, two doubles.<|im_end|>I can offer a discount.<|im_end|>"
    rendered = tokenizer.apply_chat_template(CHAT[:2], tokenize=False, add_generation_prompt=True)
    assert rendered == ("<|im_start|>system\nYou are a hotel guest.<|im_end|>\n"
                        "<|im_start|>user\nDo you have rooms?<|im_end|>\n<|im_start|>assistant\n")


def test_default_system_prompt_only_when_missing(tiny_dir: Path) -> None:
    _, tokenizer = load_base(tiny_dir, device="cpu")
    tokenizer.chat_template = chatml_template("Be 'kind'.")  # SmolLM2 ships a default system prompt
    without = tokenizer.apply_chat_template(CHAT[1:3], tokenize=False)
    with_system = tokenizer.apply_chat_template(CHAT[:3], tokenize=False)
    assert without.startswith("<|im_start|>system\nBe 'kind'.<|im_end|>\n<|im_start|>user")
    assert "Be 'kind'." not in with_system
    assert is_chat_template_stop_token_trained(tokenizer)


def test_build_is_seeded(tmp_path: Path) -> None:
    texts = list(SAMPLE_TEXTS) * 2
    a = build_tiny(tmp_path / "a", texts, TINY_TEST_CONFIG, seed=7)
    b = build_tiny(tmp_path / "b", texts, TINY_TEST_CONFIG, seed=7)
    c = build_tiny(tmp_path / "c", texts, TINY_TEST_CONFIG, seed=8)
    blob = lambda r: (r.output_dir / "model.safetensors").read_bytes()  # noqa: E731
    assert blob(a) == blob(b) != blob(c)
    assert (a.output_dir / "tokenizer.json").read_text() == (b.output_dir / "tokenizer.json").read_text()


def test_empty_corpus_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no texts"):
        build_tiny(tmp_path / "x", [], TINY_TEST_CONFIG)


def test_build_base_tiny_from_conversations_jsonl(tmp_path: Path, fixtures_dir: Path) -> None:
    corpus = fixtures_dir / "models" / "conversations_small.jsonl"
    config = BaseModelSettings.from_params({"base_model": {
        "kind": "tiny", "output_dir": "models/base",
        "tiny": {**{k: v for k, v in vars(TINY_TEST_CONFIG).items()}, "tokenizer_corpus": str(corpus)}}})
    result = build_base(config, seed=1, root=tmp_path)
    assert result.output_dir == tmp_path / "models" / "base"
    texts, bad = corpus_texts(corpus)
    assert len(bad) == 1 and bad[0].line == 4  # the fixture's malformed line is reported, not silently lost
    manifest = json.loads((result.output_dir / "mimesis_base.json").read_text())
    assert manifest["bad_records_skipped"] == 1
    assert manifest["corpus_texts"] == len(texts) > 0
    assert any("private note" in t for t in texts)  # private reasoning is tokenizer text too


def test_config_rejects_unknown_keys_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="base_model.tiny.*hidden_sise"):
        BaseModelSettings.from_params({"base_model": {"tiny": {"hidden_sise": 3}}})
    with pytest.raises(ValueError, match="multiple"):
        TinySettings(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError, match="dtype"):
        BaseModelSettings(dtype="float8")


def test_trl_sft_trains_on_assistant_tokens_only(tiny_dir: Path, tmp_path: Path) -> None:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model, tokenizer = load_base(tiny_dir, device="cpu")
    dataset = Dataset.from_list([{"messages": CHAT}] * 2)
    args = SFTConfig(output_dir=str(tmp_path / "sft"), assistant_only_loss=True, use_cpu=True, report_to=[],
                     max_steps=1, per_device_train_batch_size=1, save_strategy="no")
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    batch = trainer.data_collator([trainer.train_dataset[0]])
    trained = [tok for tok, label in zip(batch["input_ids"][0].tolist(), batch["labels"][0].tolist(),
                                         strict=True) if label != -100]
    assert tokenizer.decode(trained) == "Yes, two doubles.<|im_end|>I can offer a discount.<|im_end|>"
