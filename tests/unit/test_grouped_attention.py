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


def test_decode_step_folds_query_heads_and_matches_sdpa() -> None:
    """One new token per row over a padded cache: the folded path (`decode_attention`) gives plain
    sdpa's logits, with and without a mask."""
    model = _model().eval()
    ids = torch.randint(0, 300, (3, 12), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(3, 13, dtype=torch.long)
    mask[0, :4] = 0
    nxt = torch.randint(0, 300, (3, 1), generator=torch.Generator().manual_seed(3))
    positions = (mask.cumsum(-1) - 1).clamp(min=0)

    def step(padding: torch.Tensor | None) -> torch.Tensor:
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=None if padding is None else padding[:, :12],
                        position_ids=positions[:, :12], use_cache=True)
            return model(input_ids=nxt, attention_mask=padding, position_ids=positions[:, 12:],
                         past_key_values=out.past_key_values, use_cache=True).logits

    plain = [step(mask), step(None)]
    with grouped_attention(model):
        grouped = [step(mask), step(None)]
    for a, b in zip(plain, grouped, strict=True):
        torch.testing.assert_close(b, a)


def test_decode_attention_equals_repeated_kv_heads() -> None:
    from mimesis_rl.models.inference.attention import decode_attention

    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(4, h, n, 8, generator=gen) for h, n in ((6, 1), (2, 10), (2, 10)))
    mask = torch.ones(4, 1, 1, 10, dtype=torch.bool)
    mask[1, ..., :3] = False
    sdpa = torch.nn.functional.scaled_dot_product_attention
    keys, values = k.repeat_interleave(3, 1), v.repeat_interleave(3, 1)  # what plain sdpa does off CUDA
    torch.testing.assert_close(decode_attention(q, k, v, mask, None),
                               sdpa(q, keys, values, attn_mask=mask).transpose(1, 2))
    torch.testing.assert_close(decode_attention(q, k, v, None, None), sdpa(q, keys, values).transpose(1, 2))
