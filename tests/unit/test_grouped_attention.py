"""Grouped-query attention without the repeated KV heads computes the same as transformers' sdpa."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from mimesis_rl.models.inference.attention import NAME, grouped_attention, use_grouped_attention


def _model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, attn_implementation="sdpa")
    return LlamaForCausalLM(config)


def _loss_and_grads(model: LlamaForCausalLM) -> tuple[torch.Tensor, list[torch.Tensor]]:
    ids = torch.randint(0, 300, (3, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, :5] = 0  # left padding: the case where plain sdpa repeats the KV heads
    mask[1, :2] = 0
    model.zero_grad()
    out = model(input_ids=ids, attention_mask=mask, labels=ids)
    out.loss.backward()
    return out.logits.detach(), [p.grad.clone() for p in model.parameters()]


def test_grouped_attention_matches_sdpa_forward_and_backward() -> None:
    model = _model()
    logits, grads = _loss_and_grads(model)
    with grouped_attention(model):
        assert model.config._attn_implementation == NAME
        g_logits, g_grads = _loss_and_grads(model)
    assert model.config._attn_implementation == "sdpa"
    torch.testing.assert_close(g_logits, logits)
    for a, b in zip(grads, g_grads, strict=True):
        torch.testing.assert_close(a, b)


def test_use_grouped_attention_switches_sdpa_only() -> None:
    model = _model()
    assert use_grouped_attention(model) and model.config._attn_implementation == NAME
    assert not use_grouped_attention(model)  # already switched
    model.config._attn_implementation = "eager"
    assert not use_grouped_attention(model) and model.config._attn_implementation == "eager"
