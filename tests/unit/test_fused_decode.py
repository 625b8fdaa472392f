"""The fused decode step (`models.inference.fused`) computes what HF's forward computes, over the
engine's own cache, and the engine's transcripts do not change with it."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference import fused
from mimesis_rl.models.inference.attention import grouped_attention
from mimesis_rl.models.inference.kvcache import build_inputs, layout
from mimesis_rl.models.inference.scheduler import generate_batch

VOCAB = 96
ROPES = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 2.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64},
}


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_llama(rope: str = "default", dtype: torch.dtype = torch.float32, seed: int = 0) -> LlamaForCausalLM:
    """A random frozen Llama with grouped-query attention (4 query heads over 2 KV heads); weights
    large enough that its greedy output depends on the context."""
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         rope_scaling=ROPES[rope], tie_word_embeddings=True, pad_token_id=0)
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
            else:
                param.normal_(0.0, 0.35)
    for param in model.parameters():
        param.requires_grad_(False)
    return model.to(dtype).eval()


def contexts(rows: int, seed: int = 0) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(3, VOCAB, (5 + 7 * row % 23,), generator=generator).tolist() for row in range(rows)]


def prefilled(model: LlamaForCausalLM, ctxs: list[list[int]], spare: int):
    """(cache, mask, positions, next tokens) of a left-padded batch after HF's prefill."""
    plan = layout(ctxs, [None] * len(ctxs))
    ids, mask, past = build_inputs(ctxs, [None] * len(ctxs), plan, 0, model.config.num_hidden_layers, spare)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=past,
                use_cache=True)
    return past, mask, mask.sum(-1), out.logits[:, -1].argmax(-1)


def run_steps(model: LlamaForCausalLM, ctxs: list[list[int]], steps: int, use_fused: bool,
              dead_row: int | None = 1):
    """Logits of `steps` greedy decode steps (HF's forward or the fused step) and the final cache."""
    decoder = fused.decoder_for(model) if use_fused else None
    assert (decoder is not None) == use_fused
    with torch.inference_mode(), grouped_attention(model):
        past, mask, positions, tokens = prefilled(model, ctxs, steps + 1)
        rows = len(ctxs)
        mask = torch.cat([mask, torch.ones(rows, steps, dtype=torch.long)], dim=1)
        if dead_row is not None:
            mask[dead_row, -2] = 0  # a dead row's column in the middle, as when a row has finished
        width = mask.shape[1] - steps
        out = []
        for _ in range(steps):
            logits = fused.decode_logits(model, decoder, tokens.unsqueeze(1), mask[:, : width + 1],
                                         positions.unsqueeze(1), past)
            out.append(logits.float())
            tokens, width, positions = logits.argmax(-1), width + 1, positions + 1
    return torch.stack(out), past


@pytest.mark.parametrize("rope", sorted(ROPES))
def test_fused_step_matches_hf_forward_in_fp32(rope):
    model = tiny_llama(rope)
    ctxs = contexts(5)
    assert len({len(c) for c in ctxs}) == 5
    hf, hf_past = run_steps(model, ctxs, 6, use_fused=False)
    ours, our_past = run_steps(model, ctxs, 6, use_fused=True)
    assert hf.abs().max() > 1.0
    torch.testing.assert_close(ours, hf, atol=1e-5, rtol=1e-5)
    # the engine's cache holds what HF's attention would have written, layer by layer
    for a, b in zip(hf_past.layers, our_past.layers, strict=True):
        torch.testing.assert_close(b.keys, a.keys, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(b.values, a.values, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rows", [1, 3])
def test_fused_step_matches_hf_forward_without_padding(rows):
    model = tiny_llama()
    ctxs = [contexts(2)[1]] * rows  # one length: no mask at all
    hf, _ = run_steps(model, ctxs, 4, use_fused=False, dead_row=None)
    ours, _ = run_steps(model, ctxs, 4, use_fused=True, dead_row=None)
    torch.testing.assert_close(ours, hf, atol=1e-5, rtol=1e-5)


def test_fused_step_in_bf16_is_as_close_to_fp32_as_hf_is():
    ctxs = contexts(6, seed=1)
    reference, _ = run_steps(tiny_llama(), ctxs, 5, use_fused=False)
    model = tiny_llama(dtype=torch.bfloat16)
    # every step fed the same tokens: greedy in both, compared while they agree
    hf, _ = run_steps(model, ctxs, 5, use_fused=False)
    ours, _ = run_steps(model, ctxs, 5, use_fused=True)
    scale = reference.abs().max()
    hf_error = (hf[0] - reference[0]).abs().max()
    our_error = (ours[0] - reference[0]).abs().max()
    assert our_error <= 2 * hf_error + 1e-3 * scale
    assert (ours - hf).abs().max() <= 0.05 * scale


def engine_runs(model, params: SamplingParams, monkeypatch: pytest.MonkeyPatch, on: bool):
    monkeypatch.setenv(fused.ENV, "1" if on else "0")
    calls = []
    real = fused.FusedDecoder.__call__
    monkeypatch.setattr(fused.FusedDecoder, "__call__", lambda self, *a: calls.append(1) or real(self, *a))
    ctxs = contexts(7, seed=2)
    gens = generate_batch(model, ctxs, params, stop_ids=[1, 2], pad_id=0, seeds=list(range(100, 107)),
                          keep_cache=True)
    assert bool(calls) == on
    return gens


@pytest.mark.parametrize(
    "params",
    [SamplingParams(max_new_tokens=14),
     SamplingParams(max_new_tokens=14, do_sample=True, temperature=0.9, top_p=0.95, top_k=40)],
    ids=["greedy", "sampled"],
)
def test_engine_transcripts_are_the_same_with_and_without_the_fused_step(params, monkeypatch):
    model = tiny_llama()
    hf = engine_runs(model, params, monkeypatch, on=False)
    ours = engine_runs(model, params, monkeypatch, on=True)
    assert len({tuple(g.token_ids) for g in hf}) > 1, "the tiny model must answer its contexts differently"
    assert any(len(g.token_ids) > 3 for g in hf)
    for a, b in zip(hf, ours, strict=True):
        assert a.token_ids == b.token_ids
        torch.testing.assert_close(torch.tensor(b.logprobs), torch.tensor(a.logprobs), atol=1e-5, rtol=0)
        assert a.cache is not None and b.cache is not None and a.cache.length == b.cache.length
        for (ka, va), (kb, vb) in zip(a.cache.layers, b.cache.layers, strict=True):
            torch.testing.assert_close(kb, ka, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(vb, va, atol=1e-5, rtol=1e-5)


def test_only_frozen_plain_llamas_qualify_and_weights_are_followed(monkeypatch):
    from peft import LoraConfig, get_peft_model

    monkeypatch.delenv(fused.ENV, raising=False)
    model = tiny_llama()
    first = fused.decoder_for(model)
    assert first is not None and fused.decoder_for(model) is first  # built once
    assert first.extra_bytes() == sum(  # every projection and the LM head, packed once
        m.weight.numel() * 4 for name, m in model.named_modules()
        if name.endswith(("_proj", "lm_head")))
    monkeypatch.setenv(fused.ENV, "0")
    assert fused.decoder_for(model) is None
    monkeypatch.setenv(fused.ENV, "1")
    with torch.no_grad():
        model.model.layers[0].self_attn.k_proj.weight.mul_(1.5)  # in place: the fused copy must follow
    rebuilt = fused.decoder_for(model)
    assert rebuilt is not first
    torch.testing.assert_close(fused._dense(rebuilt.layers[0].qkv)[32:48],
                               model.model.layers[0].self_attn.k_proj.weight)

    model.model.layers[1].mlp.up_proj.weight.requires_grad_(True)  # being trained: decodes between steps
    assert fused.decoder_for(model) is rebuilt
    model.model.layers[1].mlp.up_proj.weight.requires_grad_(False)

    config = LoraConfig(r=2, lora_alpha=16, target_modules=["q_proj", "up_proj"], init_lora_weights=False)
    peft = get_peft_model(model, config)
    for param in peft.parameters():
        param.requires_grad_(False)
    step = fused.decoder_for(peft)  # the active adapter's low-rank updates over the packed base
    assert isinstance(step, fused.AdapterStep) and step.decoder is rebuilt and step.adapter == "default"
    ctxs = contexts(4, seed=4)
    ours, _ = run_steps(peft, ctxs, 4, use_fused=True)
    hf, _ = run_steps(peft, ctxs, 4, use_fused=False)
    with peft.disable_adapter():
        bare, _ = run_steps(peft, ctxs, 4, use_fused=False)
    assert (hf - bare).abs().max() > 0.1  # the adapter changes the logits, and the fused step follows
    torch.testing.assert_close(ours, hf, atol=1e-5, rtol=1e-5)
    for param in peft.parameters():  # leaving `disable_adapter` made the adapter trainable again
        param.requires_grad_(False)
    with peft.disable_adapter():
        assert fused.decoder_for(peft) is not None
    for param in peft.parameters():  # leaving `disable_adapter` made the adapter trainable again
        param.requires_grad_(False)
    peft.merge_adapter()
    merged = fused.decoder_for(peft)
    assert merged is not None
    ctxs = contexts(3, seed=3)
    ours, _ = run_steps(peft, ctxs, 3, use_fused=True)
    hf, _ = run_steps(peft, ctxs, 3, use_fused=False)
    torch.testing.assert_close(ours, hf, atol=1e-5, rtol=1e-5)

    other = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                         attention_bias=True)).eval()
    for param in other.parameters():
        param.requires_grad_(False)
    assert fused.decoder_for(other) is None  # biased projections: not what the fused step computes


ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.mark.parametrize("targets", [["q_proj", "v_proj"], ALL_PROJECTIONS], ids=["qv", "all"])
def test_an_active_lora_adapter_is_added_to_the_fused_step(targets):
    """A learned party (an active, unmerged LoRA adapter: simulators, agents) decodes through the fused
    step with the adapter's updates added, and the engine writes the transcripts HF's forward writes.
    Two adapters on one base: each party gets its own, switching back and forth."""
    from peft import LoraConfig, get_peft_model

    model = tiny_llama()
    config = LoraConfig(r=4, lora_alpha=8, target_modules=targets, init_lora_weights=False)
    peft = get_peft_model(model, config, adapter_name="agent")
    peft.add_adapter("simulator", LoraConfig(r=2, lora_alpha=2, target_modules=["q_proj", "down_proj"],
                                             init_lora_weights=False))
    for param in peft.parameters():
        param.requires_grad_(False)
    peft.eval()
    ctxs = contexts(4, seed=5)
    seen = {}
    for adapter in ("agent", "simulator", "agent"):
        peft.set_adapter(adapter)
        for param in peft.parameters():
            param.requires_grad_(False)
        step = fused.decoder_for(peft)
        assert isinstance(step, fused.AdapterStep) and step.adapter == adapter
        ours, _ = run_steps(peft, ctxs, 4, use_fused=True)
        hf, _ = run_steps(peft, ctxs, 4, use_fused=False)
        torch.testing.assert_close(ours, hf, atol=1e-5, rtol=1e-5)
        seen.setdefault(adapter, ours)
        torch.testing.assert_close(ours, seen[adapter])
    assert (seen["agent"] - seen["simulator"]).abs().max() > 0.1
