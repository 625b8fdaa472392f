"""Per-dialogue KV caches carried from one round to the next, so a turn only prefills what is new.

Why: without it every round re-reads each dialogue's whole history (system prompt, all turns)
through the model; on CPU that prefill dominates the cost of a multi-turn rollout. Each dialogue
keeps a compact cache (its own tokens only, no padding). A round lays the rows out as

    [pad][cached tokens of row i][pad][new tokens of row i]      (C + W columns)

with the attention mask 0 on the pads; `generate` derives position ids from the mask, so every
real token keeps its position and the cached keys (already rotated for those positions) stay
valid. Afterwards each row's real positions are gathered back into a compact cache.

Only full-attention decoders with a plain `DynamicCache` qualify (Llama, SmolLM2, ...); sliding-
window models fall back to full prefill.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import DynamicLayer


@dataclass
class RowCache:
    """One dialogue's keys/values: per layer (kv_heads, length, head_dim), for its first `length` tokens."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    length: int

    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.layers)


def supports_reuse(model: PreTrainedModel) -> bool:
    config = (
        model.config.get_text_config(decoder=True)
        if hasattr(model.config, "get_text_config")
        else model.config
    )
    if getattr(config, "sliding_window", None) or getattr(config, "attention_chunk_size", None):
        return False
    return getattr(config, "layer_types", None) is None or all(
        t == "full_attention" for t in config.layer_types
    )


@dataclass
class Layout:
    """Where each row's tokens sit in one round's (C + W)-column input."""

    cached: list[int]  # c_i: tokens of row i taken from its cache
    new: list[int]  # n_i: tokens of row i fed as input
    width_cached: int  # C
    width_new: int  # W



def cached_prefix(context: Sequence[int], cache: RowCache | None) -> int:
    """How many leading tokens of `context` come from `cache`: at least one token is always fed,
    because the first generated token needs a forward pass to come from."""
    return min(cache.length, len(context) - 1) if cache is not None else 0


def layout(contexts: Sequence[Sequence[int]], caches: Sequence[RowCache | None]) -> Layout:
    cached = [cached_prefix(ctx, c) for ctx, c in zip(contexts, caches, strict=True)]
    new = [len(ctx) - c for ctx, c in zip(contexts, cached, strict=True)]
    return Layout(cached, new, max(cached), max(new))


class BufferedLayer(DynamicLayer):
    """A `DynamicLayer` that writes each step into a preallocated buffer instead of `torch.cat`.

    Why: `DynamicLayer` concatenates its whole cache every decoding step; for 16 rows x ~1000
    cached tokens that copy was ~40% of a batched decoding step on CPU. The buffer holds the
    prefix plus `spare` positions (the round's new tokens); `keys`/`values` are views of it.
    """

    def __init__(
        self, spare: int, keys: torch.Tensor | None = None, values: torch.Tensor | None = None
    ) -> None:
        super().__init__()
        self.spare = spare
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None
        self._length = 0
        if keys is not None and values is not None:
            self._write(keys, values)

    def _write(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        n = key_states.shape[-2]
        if self._keys is None or self._values is None or self._length + n > self._keys.shape[-2]:
            capacity = self._length + n + self.spare
            keys = key_states.new_empty((*key_states.shape[:2], capacity, key_states.shape[-1]))
            values = value_states.new_empty((*value_states.shape[:2], capacity, value_states.shape[-1]))
            if self._length and self._keys is not None and self._values is not None:
                keys[:, :, : self._length] = self._keys[:, :, : self._length]
                values[:, :, : self._length] = self._values[:, :, : self._length]
            self._keys, self._values = keys, values
        self._keys[:, :, self._length : self._length + n] = key_states
        self._values[:, :, self._length : self._length + n] = value_states
        self._length += n
        self.keys, self.values = self._keys[:, :, : self._length], self._values[:, :, : self._length]
        if not self.is_initialized:
            self.dtype, self.device, self.is_initialized = key_states.dtype, key_states.device, True

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, cache_kwargs: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self._write(key_states, value_states)
        return self.keys, self.values

    def keep_rows(self, index: torch.Tensor) -> None:
        """Keep only these batch rows (finished rows leave a decoding batch), spare room included."""
        if self._keys is None or self._values is None:
            return
        self._keys = self._keys.index_select(0, index)
        self._values = self._values.index_select(0, index)
        self.keys, self.values = self._keys[:, :, : self._length], self._values[:, :, : self._length]

    def _rebuffer(self) -> None:
        """After an operation that replaced `keys`/`values`, they become the buffer (no spare room)."""
        self._keys, self._values, self._length = self.keys, self.values, self.keys.shape[-2]

    def crop(self, max_length: int) -> None:
        super().crop(max_length)
        self._rebuffer()

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self._rebuffer()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        self._rebuffer()


def build_inputs(
    contexts: Sequence[Sequence[int]],
    caches: Sequence[RowCache | None],
    plan: Layout,
    pad_id: int,
    num_layers: int,
    spare: int,
) -> tuple[torch.Tensor, torch.Tensor, DynamicCache]:
    """(input_ids, attention_mask, past_key_values) for one round (ids and mask on CPU).

    `spare`: room for the tokens this round will add (the new input and the generated tokens).
    """
    C, W = plan.width_cached, plan.width_new
    ids = torch.full((len(contexts), C + W), pad_id, dtype=torch.long)
    mask = torch.zeros((len(contexts), C + W), dtype=torch.long)
    for row, ctx in enumerate(contexts):
        c, n = plan.cached[row], plan.new[row]
        ctx_t = torch.tensor(list(ctx), dtype=torch.long)
        ids[row, C - c : C], mask[row, C - c : C] = ctx_t[:c], 1
        ids[row, C + W - n :], mask[row, C + W - n :] = ctx_t[c:], 1
    past = DynamicCache()
    if C == 0:
        past.layers = [BufferedLayer(spare) for _ in range(num_layers)]
        return ids, mask, past
    first = next(c for c in caches if c is not None)
    layers = []
    for layer, (k0, v0) in enumerate(first.layers):
        keys = k0.new_zeros((len(contexts), k0.shape[0], C, k0.shape[2]))
        values = v0.new_zeros((len(contexts), v0.shape[0], C, v0.shape[2]))
        for row, cache in enumerate(caches):
            c = plan.cached[row]
            if c and cache is not None:
                keys[row, :, C - c :] = cache.layers[layer][0][:, :c]
                values[row, :, C - c :] = cache.layers[layer][1][:, :c]
        layers.append(BufferedLayer(spare, keys, values))
    past.layers = layers
    return ids, mask, past


def merge_right_aligned(parts: Sequence[tuple[DynamicCache, int]], spare: int) -> tuple[DynamicCache, int]:
    """One cache holding every part's rows, each part's `width` written columns right-aligned to the
    widest (rows that join a running batch pad on the left, like any shorter row); `spare` free columns
    after them. Returns (cache, width). Positions live in the keys (rotary), so shifting columns is free."""
    width = max(w for _, w in parts)
    merged = DynamicCache()
    layers = []
    for index in range(len(parts[0][0].layers)):
        sample = parts[0][0].layers[index].keys
        rows = sum(p.layers[index].keys.shape[0] for p, _ in parts)
        shape = (rows, sample.shape[1], width + spare, sample.shape[3])
        keys, values = sample.new_zeros(shape), sample.new_zeros(shape)
        row = 0
        for cache, w in parts:
            layer = cache.layers[index]
            n = layer.keys.shape[0]
            keys[row : row + n, :, width - w : width] = layer.keys[:, :, :w]
            values[row : row + n, :, width - w : width] = layer.values[:, :, :w]
            row += n
        buffered = BufferedLayer(spare)
        buffered._keys, buffered._values, buffered._length = keys, values, width
        buffered.keys, buffered.values = keys[:, :, :width], values[:, :, :width]
        buffered.dtype, buffered.device, buffered.is_initialized = keys.dtype, keys.device, True
        layers.append(buffered)
    merged.layers = layers
    return merged, width


def extract_columns(past: DynamicCache, slot: int, columns: torch.Tensor) -> RowCache:
    """The compact cache of the row in `slot`, from its real `columns` (its mask's ones)."""
    layers = []
    for layer in past.layers:
        index = columns.to(layer.keys.device)
        layers.append((layer.keys[slot].index_select(1, index), layer.values[slot].index_select(1, index)))
    return RowCache(layers, int(columns.numel()))
