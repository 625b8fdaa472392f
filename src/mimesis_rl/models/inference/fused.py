"""A hand-written single-token decode step for Llama-family models and their LoRA adapters (`decode_logits`).

Why: on CPU a batched decode step of SmolLM2-135M spent most of its time around the arithmetic, not
in it: 211 dispatch-bound matmuls (7 projections x 30 layers + the LM head), ~1,000 small ops
(RMSNorm in five pieces, rotary per tensor, casts, a 4-D mask built per step) and the Python of
HF's module stack. This step computes the same thing with fewer, larger calls:

- q/k/v as one matmul and gate/up as one matmul per layer (4 instead of 7);
- `torch.nn.functional.rms_norm` (one op) instead of HF's five-op RMSNorm;
- cos/sin once per step (the model's own `rotary_emb`, so any rope scaling the config names is
  honoured), rotary applied to q and k together;
- the padding mask as one boolean [B, 1, 1, K] tensor per step, shared by every layer;
- grouped-query attention without repeating the KV heads: with one query position per row, the
  `G` query heads sharing a KV head are folded into SDPA's query-length axis ([B, Hkv, G, D]
  against [B, Hkv, K, D]); the mask masks keys only, so this is the same attention;
- the LM head on the new position only;
- every weight of the step prepacked into oneDNN's blocked layout once (`_pack`): a plain `F.linear`
  re-blocks its weight on every call, which at 16 rows costs as much as the product (the 49152x576
  LM head: 10.1 vs 5.8 ms, gate/up 0.38 vs 0.28 ms, bf16, one AMD EPYC thread; bit-identical).

Prefill stays HF's forward. The KV cache is the engine's own `DynamicCache`: every layer's new key
and value go through `past.update(k, v, layer)` exactly as HF's attention calls it, so HF and fused
steps may alternate over one cache.

Numbers: in fp32 the logits match HF's forward to ~1e-6; in bf16 they differ by bf16 rounding only
(`rms_norm` rounds once where HF rounds the normalised states and then the weighted product).

Memory: the fused q/k/v and gate/up weights and the o/down projections and LM head are copies in
oneDNN's layout (or plain copies where oneDNN is missing); norms and embedding are the model's own
tensors. For SmolLM2-135M that is 134M extra parameters (~270 MB in bf16, about the weights once
more), held while the model lives (a weak reference keys the cache). Packed weights cannot be the
model's own parameters (their layout is oneDNN's), and re-pointing q/k/v at views of one fused
tensor makes them share storage, which `save_pretrained` treats as tied weights and drops.

Eligibility (`decoder_for`): a `LlamaForCausalLM` (or PEFT wrapper) with plain bias-free linear
projections of one dtype, SiLU MLP, full attention, on CPU, decoding with gradients off. Adapters:
merged or disabled ones are in the weights or out of them; one active, unmerged plain LoRA adapter
on the projections is added (`AdapterStep`: its factors read at the start of each generation, x @
A.T @ (scaling B).T in fp32 beside the packed product, as PEFT adds it, in eval mode: the engine's
runners decode in it); DoRA, a LoRA bias, an adapter elsewhere (embedding, LM head), two adapters
active at once or a model left in training mode (LoRA dropout) get HF's forward. A model being
trained qualifies between its steps (a frozen party sharing the policy's base, a policy's own
rollouts). The packed weights are rebuilt when any source parameter is replaced or modified (checked
once per `generate` call, element by element: PEFT's `merge_adapter` writes through `.data`, which
no version counter sees).
`MIMESIS_FUSED_DECODE=0` turns it off.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from mimesis_rl.models.inference.attention import decode_attention

ENV = "MIMESIS_FUSED_DECODE"
DEFAULT_ENABLED = True


def enabled() -> bool:
    """The switch: `MIMESIS_FUSED_DECODE` = 0/false/off turns the fused decode step off."""
    value = os.environ.get(ENV)
    if value is None:
        return DEFAULT_ENABLED
    return value.strip().lower() not in {"0", "false", "off", "no", ""}


PACK_ROWS = 16  # the batch oneDNN blocks the weights for; any other batch runs on them too


def _pack(weight: torch.Tensor) -> torch.Tensor:
    """`weight` ([out, in]) in oneDNN's blocked layout for `_linear`, or a plain copy where oneDNN
    cannot take it."""
    if torch.backends.mkldnn.is_available() and weight.dtype in (torch.float32, torch.bfloat16):
        try:
            return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS)
        except (RuntimeError, NotImplementedError):  # pragma: no cover - a build without the op
            pass
    return weight.detach().clone()


def _linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x @ weight.T for a weight from `_pack`."""
    if weight.is_mkldnn:
        return torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")
    return F.linear(x, weight)


def _adapted(x: torch.Tensor, weight: torch.Tensor, delta: _Delta | None) -> torch.Tensor:
    """`_linear`, plus the adapter's low-rank update where there is one: added in fp32 and rounded
    once, as PEFT's LoRA layer does (its factors are fp32)."""
    out = _linear(x, weight)
    if delta is None:
        return out
    return (out + (x.float() @ delta.a.T) @ delta.b.T).to(out.dtype)


def _dense(weight: torch.Tensor) -> torch.Tensor:
    return weight.to_dense() if weight.is_mkldnn else weight


@dataclass
class _Delta:
    """One fused matmul's low-rank update: x @ a.T @ b.T (fp32, as PEFT computes it; `b` carries the
    scaling, zero rows for the projections the adapter leaves alone)."""

    a: torch.Tensor  # [sum of ranks, in]
    b: torch.Tensor  # [out, sum of ranks]


def _delta(factors: list[Factors | None], outs: list[int]) -> _Delta | None:
    """The stacked update of projections whose outputs (`outs` wide) are concatenated in that order;
    None when none of them carries an active adapter."""
    if all(f is None for f in factors):
        return None
    ranks = [f[1].shape[0] if f is not None else 0 for f in factors]
    inputs = next(f[1].shape[1] for f in factors if f is not None)
    a = torch.zeros(sum(ranks), inputs, dtype=torch.float32)
    b = torch.zeros(sum(outs), sum(ranks), dtype=torch.float32)
    row = col = 0
    for factor, rank, out in zip(factors, ranks, outs, strict=True):
        if factor is not None:
            _, fa, fb, scaling = factor
            a[col : col + rank] = fa.detach().float()
            b[row : row + out, col : col + rank] = fb.detach().float() * scaling
        row, col = row + out, col + rank
    return _Delta(a, b)


Deltas = list[tuple["_Delta | None", ...]]


def _lora_layers(base: Any) -> tuple[Deltas, str | None]:
    """Per layer, the (qkv, o, gate_up, down) updates of the active adapter, and the active adapters'
    names joined (None when none is active: the base alone; several names: not one party's weights)."""
    layers, names = [], set()
    for layer in base.model.layers:
        modules = _projections(layer)  # q, k, v, gate, up, o, down
        factors = [_lora_factors(m) for m in modules]
        width = [_weight(m).shape[0] for m in modules]
        layers.append((_delta(factors[:3], width[:3]), _delta(factors[5:6], width[5:6]),
                       _delta(factors[3:5], width[3:5]), _delta(factors[6:], width[6:])))
        names |= {f[0] for f in factors if f is not None}
    return layers, (",".join(sorted(names)) or None)


@dataclass
class _Layer:
    qkv: torch.Tensor  # [(H + 2 Hkv) * D, hidden], packed (`_pack`)
    o: torch.Tensor  # o_proj's weight, packed
    gate_up: torch.Tensor  # [2 I, hidden], packed
    down: torch.Tensor  # down_proj's weight, packed
    attn_norm: torch.Tensor
    mlp_norm: torch.Tensor


def _weight(module: Any) -> torch.Tensor:
    """A linear layer's weight, through a (merged or disabled) PEFT wrapper."""
    return getattr(module, "base_layer", module).weight


def _plain_linear(module: Any) -> bool:
    base = getattr(module, "base_layer", module)
    return isinstance(base, torch.nn.Linear) and base.bias is None


def _unwrap(model: Any) -> Any | None:
    """The `LlamaForCausalLM` inside `model`, or None when the fused step would not compute what
    `model(...)` computes (another architecture; an adapter it cannot add, see `_addable`)."""
    from transformers import LlamaForCausalLM

    if isinstance(model, LlamaForCausalLM):
        base = model
    else:
        get_base = getattr(model, "get_base_model", None)
        base = get_base() if callable(get_base) else None
        if not isinstance(base, LlamaForCausalLM):
            return None
    try:
        from peft.tuners.tuners_utils import BaseTunerLayer
    except ImportError:  # pragma: no cover - peft is a dependency
        BaseTunerLayer = ()  # noqa: N806
    projections = {id(m) for layer in base.model.layers for m in _projections(layer)}
    for module in base.modules():
        if BaseTunerLayer and isinstance(module, BaseTunerLayer):
            if module.disable_adapters:
                continue
            unmerged = set(module.active_adapters) - set(module.merged_adapters)
            if unmerged and (id(module) not in projections or not _addable(module)):
                return None
        elif type(module).__module__.startswith("peft."):  # modules_to_save and other wrappers
            return None
    return base


Factors = tuple[str, torch.Tensor, torch.Tensor, float]  # (adapter, A [r, in], B [out, r], scaling)


def _held(module: Any) -> list[str]:
    """The active, unmerged LoRA adapters a projection holds (none when its adapters are off)."""
    if not hasattr(module, "lora_A") or module.disable_adapters:
        return []
    return [a for a in module.active_adapters if a in module.lora_A and a not in module.merged_adapters]


def _lora_factors(module: Any) -> Factors | None:
    """The LoRA update a projection adds now; None when it adds nothing (`_addable` vetted it)."""
    held = _held(module)
    if not held:
        return None
    name = held[0]
    return name, module.lora_A[name].weight, module.lora_B[name].weight, float(module.scaling[name])


def _addable(module: Any) -> bool:
    """Whether the fused step can add what `module`'s active adapters add: one plain LoRA (no DoRA, no
    LoRA bias, no other tuner) or nothing."""
    if not hasattr(module, "lora_A") or not hasattr(module, "lora_B"):
        return False
    held = _held(module)
    return len(held) <= 1 and all(
        isinstance(module.lora_A[a], torch.nn.Linear) and isinstance(module.lora_B[a], torch.nn.Linear)
        and module.lora_B[a].bias is None and not getattr(module, "use_dora", {}).get(a, False)
        for a in held
    )


def eligible(model: Any) -> Any | None:
    """The Llama model the fused step may stand in for, or None."""
    base = _unwrap(model)
    if base is None:
        return None
    config = base.config
    if (
        getattr(config, "hidden_act", None) != "silu"
        or getattr(config, "attention_bias", False)
        or getattr(config, "mlp_bias", False)
        or getattr(config, "pretraining_tp", 1) != 1
        or getattr(config, "sliding_window", None)
        or base.device.type != "cpu"
    ):
        return None
    if not all(_plain_linear(m) for layer in base.model.layers for m in _projections(layer)):
        return None
    if not isinstance(base.lm_head, torch.nn.Linear) or base.lm_head.bias is not None:
        return None
    if len({t.dtype for t in _used(base)}) != 1:  # e.g. an fp32 embedding beside bf16 projections
        return None
    return base


def _projections(layer: Any) -> tuple[Any, ...]:
    """A decoder layer's linear layers: q, k, v, gate, up (the fused ones), then o, down."""
    attn, mlp = layer.self_attn, layer.mlp
    return attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj, attn.o_proj, mlp.down_proj


def _used(base: Any) -> list[torch.Tensor]:
    """Every weight the fused step reads: one dtype, or HF's forward (which casts as it goes)."""
    inner = base.model
    out = [inner.embed_tokens.weight, inner.norm.weight, base.lm_head.weight]
    for layer in inner.layers:
        out += [layer.input_layernorm.weight, layer.post_attention_layernorm.weight,
                *(_weight(m) for m in _projections(layer))]
    return out


def _fingerprint(base: Any) -> tuple[tuple[int, int], ...]:
    """Where each parameter lives and how often it was modified in place: a change means rebuild.
    Not enough alone: a write through `.data` (PEFT's `merge_adapter`) bumps no version."""
    return tuple((p.data_ptr(), p._version) for p in _used(base))  # not the adapters': read per call


def _sources(base: Any) -> list[tuple[torch.Tensor, ...]]:
    """Per layer, the weights the packed copies are made of: q, k, v, gate, up, o, down."""
    return [tuple(_weight(m) for m in _projections(layer)) for layer in base.model.layers]


class FusedDecoder:
    """The decode step of one frozen Llama model; see the module docstring."""

    def __init__(self, base: Any) -> None:
        config = base.config
        inner = base.model
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = float(config.rms_norm_eps)
        self.scaling = self.head_dim**-0.5
        self.embed = inner.embed_tokens.weight
        self.rotary = inner.rotary_emb
        self.norm = inner.norm.weight
        self.head = _pack(base.lm_head.weight)
        self.hidden = config.hidden_size
        with torch.no_grad():
            self.layers = [
                _Layer(
                    qkv=_pack(torch.cat([q, k, v])), o=_pack(o), gate_up=_pack(torch.cat([gate, up])),
                    down=_pack(down), attn_norm=layer.input_layernorm.weight,
                    mlp_norm=layer.post_attention_layernorm.weight,
                )
                for layer, (q, k, v, gate, up, o, down) in zip(inner.layers, _sources(base), strict=True)
            ]
        self.fingerprint = _fingerprint(base)
        self.dtype = self.embed.dtype

    def current(self, base: Any) -> bool:
        """Whether the packed copies still hold `base`'s weights (norms and embedding are its own
        tensors). Compares every copied element: about two decode steps' weight reads, once per
        generation."""
        if self.fingerprint != _fingerprint(base):
            return False
        with torch.no_grad():
            if not torch.equal(_dense(self.head), base.lm_head.weight):
                return False
            for layer, (q, k, v, gate, up, o, down) in zip(self.layers, _sources(base), strict=True):
                qkv, gate_up = _dense(layer.qkv), _dense(layer.gate_up)
                if not (torch.equal(qkv, torch.cat([q, k, v])) and torch.equal(gate_up, torch.cat([gate, up]))
                        and torch.equal(_dense(layer.o), o) and torch.equal(_dense(layer.down), down)):
                    return False
        return True

    def extra_bytes(self) -> int:
        """Bytes held beyond the model's own weights (the packed copies)."""
        tensors = [self.head]
        for layer in self.layers:
            tensors += [layer.qkv, layer.o, layer.gate_up, layer.down]
        return sum(t.numel() * t.element_size() for t in tensors)

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                 past: Any, lora: Deltas | None = None) -> torch.Tensor:
        """Logits [B, vocab] of one new token per row. `input_ids`, `position_ids`: [B, 1];
        `attention_mask`: [B, K] over the cached columns and the new one (1 = real); `lora`: the
        active adapter's per-layer updates (`_lora_layers`), None for the base alone."""
        rows = input_ids.shape[0]
        heads, kv, dim = self.heads, self.kv_heads, self.head_dim
        rotated = heads + kv
        hidden = F.embedding(input_ids.reshape(rows), self.embed)  # [B, hidden]
        cos, sin = self.rotary(hidden, position_ids)  # [B, 1, D], in the model's dtype
        cos, sin = cos.view(rows, 1, dim), sin.view(rows, 1, dim)
        half = dim // 2
        # no padding (one row, or rows of one length): no mask, as HF's sdpa mask is then None too
        mask = None if bool(attention_mask.all()) else attention_mask.view(rows, 1, 1, -1).bool()
        shape = (self.hidden,)
        for index, layer in enumerate(self.layers):
            qkv_d, o_d, gate_up_d, down_d = lora[index] if lora is not None else (None,) * 4
            x = F.rms_norm(hidden, shape, layer.attn_norm, self.eps)
            qkv = _adapted(x, layer.qkv, qkv_d).view(rows, rotated + kv, dim)
            qk = qkv[:, :rotated]
            turned = torch.cat((-qk[..., half:], qk[..., :half]), dim=-1)
            qk = qk * cos + turned * sin  # [B, H + Hkv, D]
            key = qk[:, heads:].unsqueeze(2)  # [B, Hkv, 1, D], as HF's attention hands it to the cache
            value = qkv[:, rotated:].unsqueeze(2)
            keys, values = past.update(key, value, index, {"sin": sin, "cos": cos, "cache_position": None})
            attn = decode_attention(qk[:, :heads].unsqueeze(2), keys, values, mask, self.scaling)
            hidden = hidden + _adapted(attn.reshape(rows, heads * dim), layer.o, o_d)
            x = F.rms_norm(hidden, shape, layer.mlp_norm, self.eps)
            gate, up = _adapted(x, layer.gate_up, gate_up_d).chunk(2, dim=-1)
            hidden = hidden + _adapted(F.silu(gate) * up, layer.down, down_d)
        return _linear(F.rms_norm(hidden, shape, self.norm, self.eps), self.head)


def _cache_dtypes(past: Any) -> set[torch.dtype]:
    """The dtypes of the cache's keys and values (empty when it holds none yet)."""
    layers = getattr(past, "layers", None) or []
    tensors = [getattr(layers[0], name, None) for name in ("keys", "values")] if layers else []
    return {t.dtype for t in tensors if isinstance(t, torch.Tensor)}


_DECODERS: weakref.WeakKeyDictionary[Any, FusedDecoder] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class AdapterStep:
    """The fused step of a base with one LoRA adapter active: the base's packed weights plus the
    adapter's low-rank updates, read from the adapter when the generation starts."""

    decoder: FusedDecoder
    lora: Deltas
    adapter: str

    @property
    def dtype(self) -> torch.dtype:
        return self.decoder.dtype

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                 past: Any) -> torch.Tensor:
        return self.decoder(input_ids, attention_mask, position_ids, past, self.lora)


def decoder_for(model: Any) -> FusedDecoder | AdapterStep | None:
    """The fused decode step for `model` as it is now (its active adapter included; the base's packed
    weights built once, rebuilt if they changed), or None when it is switched off or the model does
    not qualify. Call once per generation, not per step."""
    if not enabled():
        return None
    base = eligible(model)
    if base is None:
        return None
    lora, adapter = _lora_layers(base)
    if adapter is not None and ("," in adapter or base.training):  # two parties' adapters at once,
        return None  # or LoRA dropout the caller left on: HF's forward
    decoder = _DECODERS.get(base)
    if decoder is None or not decoder.current(base):
        decoder = FusedDecoder(base)
        _DECODERS[base] = decoder
    return decoder if adapter is None else AdapterStep(decoder, lora, adapter)


def decode_logits(model: Any, decoder: FusedDecoder | AdapterStep | None, input_ids: torch.Tensor,
                  attention_mask: torch.Tensor, position_ids: torch.Tensor, past: Any) -> torch.Tensor:
    """One decode step, logits [B, vocab] of the new position: `decoder` (from `decoder_for(model)`)
    when there is one, else HF's forward over the same cache."""
    # the engine decodes in inference mode; under autocast HF's forward casts per op, the fused step does
    # not, nor does it over a cache another dtype wrote (HF's attention then runs as it always did)
    if (decoder is not None and not torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
            and _cache_dtypes(past) <= {decoder.dtype}):
        return decoder(input_ids, attention_mask, position_ids, past)
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                past_key_values=past, use_cache=True)
    return out.logits[:, -1, :]
