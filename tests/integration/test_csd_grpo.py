"""CSD inside the agent trainer: one real GRPO step (TRL) with the coach, the spliced teacher and the term.

Tiny random Llama with a LoRA `default` adapter as the policy, the bargain domain against a scripted
user (reasoning and patterns in every reply), the agent trainer's own `rollout_func` and hook.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from peft import LoraConfig, get_peft_model

from mimesis_rl.models.loading import load_base
from mimesis_rl.models.testing import TINY_TEST_CONFIG, make_tiny_base

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    torch.set_num_threads(1)
    config = dataclasses.replace(TINY_TEST_CONFIG, max_position_embeddings=2048)
    return make_tiny_base(tmp_path_factory.mktemp("csd-grpo") / "base", config=config)


def _policy(tiny_dir):
    torch.manual_seed(0)
    model, tok = load_base(tiny_dir, dtype=torch.float32, device="cpu")
    lora = LoraConfig(
        r=4,
        lora_alpha=64,
        target_modules=["q_proj", "v_proj"],
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora, adapter_name="default"), tok


def _train(tiny_dir, tmp_path, csd: dict):
    from mimesis_rl.agent.rl_settings import AgentRLSettings
    from mimesis_rl.agent.rl_trainer import build_trainer

    model, tok = _policy(tiny_dir)
    settings = AgentRLSettings.from_section(dict(
        variant="csd-test",
        user="scripted:cooperative",
        domains=["bargain"],
        prompts_per_domain=2,
        max_turns=2,
        agent_max_new_tokens=8,
        max_steps=1,
        batch_size=4,
        num_generations=2,
        learning_rate=1e-2,
        device="cpu",
        bf16=False,
        kl_to_sft=False,
        checkpoint_dir=str(tmp_path / "ckpt"),
        csd=csd,
    ))
    trainer = build_trainer(settings, seed=0, model=model, tokenizer=tok)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    trainer.train()
    moved = any(not torch.equal(before[n], p) for n, p in model.named_parameters() if n in before)
    return trainer, moved


@pytest.mark.parametrize("form", ["advantage", "loss"])
def test_grpo_step_with_csd(tiny_dir, tmp_path, monkeypatch, form):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer, moved = _train(tiny_dir, tmp_path, {"enabled": True, "lam": 0.5, "form": form})
    assert moved, "no trainable weight moved"
    logged = trainer.state.log_history[0]
    assert logged["csd/lambda"] == 0.5
    assert logged["csd/notes"] > 0
    assert logged["csd/agent_tokens"] > 0
    assert math.isfinite(logged["csd/reverse_kl"]) and logged["csd/abs_logp_gap"] > 0
    assert logged["csd/leak_rate"] == 0.0
    assert trainer.timing["teacher_forward"], "teacher forward time not recorded"
    notes = trainer.csd.last_notes
    assert notes and all(isinstance(n, str) and n for row in notes.values() for n in row)


def test_lambda_zero_is_plain_rl(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer, _ = _train(tiny_dir, tmp_path, {"enabled": True, "lam": 0.0})
    assert trainer.state.global_step == 1
    assert not any(k.startswith("csd/") for k in trainer.state.log_history[0])
    assert not trainer.timing.get("teacher_forward")
