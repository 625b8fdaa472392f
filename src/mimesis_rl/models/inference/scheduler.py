"""The decoding loop: a slot scheduler with continuous batching over one KV buffer.

Why not `model.generate`: a static batch waits for its longest row, decodes finished rows as padding,
and every follow-up (a re-sample of an unusable turn, a `</think>` continuation) became a new call of
1-3 rows after the batch, with steps almost as costly as the batch's (a 2-row step measured 72 ms
against 114 ms for 16 rows). Here:

- a row that stops is finished at once (tokens, log-probs, its compact KV cache) and its slot freed;
  `on_finish` may hand back a follow-up `Request`, which joins the running batch at the next step:
  it is prefilled on its own, and its KV is laid right-aligned beside the running rows' (positions
  live in the rotated keys, so columns may shift; the mask marks each row's real columns);
- finished rows leave the KV buffer in one copy once they are a quarter of it (or when rows join);
- each row samples with its own seed, step counter and temperature (`sampling.sample_rows`), so a
  row's tokens do not depend on what shares the batch, when it joined, or who left;
- log-probabilities are log_softmax(raw logits / T) of the very forward that chose each token, in
  fp32: the sampling policy's log-probability that TRL's GRPO recomputes (T = 1 when greedy).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel

from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.attention import grouped_attention
from mimesis_rl.models.inference.fused import decode_logits, decoder_for
from mimesis_rl.models.inference.generation import (
    Generation,
    GuardState,
    Request,
    TagGuard,
    contiguous_lm_head,
)
from mimesis_rl.models.inference.kvcache import (
    RowCache,
    build_inputs,
    extract_columns,
    layout,
    merge_right_aligned,
)
from mimesis_rl.models.inference.sampling import sample_rows

COMPACT_SHARE = 0.25  # finished rows leave the batch once they are this share of it
FollowUp = Callable[[int, Generation], Request | None]


class _Rows:
    """The running batch: per-row state beside one KV cache of `width` written columns."""

    def __init__(self, engine: _Engine, ids: list[int], past: Any, width: int, mask: torch.Tensor,
                 positions: torch.Tensor, recent: torch.Tensor, logits: torch.Tensor,
                 guard: GuardState | None) -> None:
        self.engine, self.ids, self.past, self.width = engine, ids, past, width
        self.mask, self.positions, self.recent = mask, positions, recent
        self.logits, self.guard = logits, guard
        requests = [engine.requests[i] for i in ids]
        params = engine.params
        self.seeds = np.array([int(r.seed or 0) & (2**64 - 1) for r in requests], dtype=np.uint64)
        self.temperature = torch.tensor([(r.temperature or params.temperature) if params.do_sample else 1.0
                                         for r in requests], dtype=torch.float32)
        self.steps = torch.zeros(len(ids), dtype=torch.long)
        self.live = [True] * len(ids)

    def choose(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(token, its log-prob) per row from the pending logits."""
        params = self.engine.params
        raw = self.logits
        policy = raw / self.temperature.unsqueeze(1)
        scores = raw.clone() if self.guard is not None else raw
        if self.guard is not None:
            self.guard(self.recent, scores, self.steps)
        if params.do_sample:
            tempered = scores / self.temperature.unsqueeze(1)
            chosen = sample_rows(tempered, self.seeds, self.steps.numpy().astype(np.uint64), params.top_k,
                                 params.top_p)
        else:
            chosen = scores.argmax(dim=-1)
        logprob = policy.gather(1, chosen.unsqueeze(1)).squeeze(1) - torch.logsumexp(policy, dim=-1)
        return chosen, logprob

    def keep(self, slots: Sequence[int]) -> None:
        index = torch.tensor(list(slots), dtype=torch.long)
        for layer in self.past.layers:
            layer.keep_rows(index.to(layer.keys.device))
        self.ids = [self.ids[s] for s in slots]
        self.live = [self.live[s] for s in slots]
        self.seeds = self.seeds[list(slots)]
        for name in ("mask", "positions", "recent", "logits", "temperature", "steps"):
            setattr(self, name, getattr(self, name).index_select(0, index))
        if self.guard is not None:
            self.guard.keep_rows(index)

    def feed(self, tokens: torch.Tensor) -> None:
        """Run the chosen tokens through the model: one more written column, new pending logits."""
        device = self.engine.device
        if self.mask.shape[1] <= self.width:
            grown = self.mask.new_zeros((self.mask.shape[0], self.width + self.engine.params.max_new_tokens))
            grown[:, : self.mask.shape[1]] = self.mask
            self.mask = grown
        self.mask[:, self.width] = torch.tensor(self.live, dtype=torch.long)
        self.recent = torch.cat([self.recent[:, 1:], tokens.unsqueeze(1)], dim=1)
        logits = decode_logits(self.engine.model, self.engine.fused, tokens.unsqueeze(1).to(device),
                               self.mask[:, : self.width + 1].to(device),
                               self.positions.unsqueeze(1).to(device), self.past)
        self.width += 1
        self.positions = self.positions + 1
        self.logits = logits.float().cpu()

    def extend(self, other: _Rows) -> None:
        """Take `other`'s rows in (freshly prefilled joiners), right-aligned to the wider of the two."""
        spare = self.engine.params.max_new_tokens + 1
        self.past, width = merge_right_aligned([(self.past, self.width), (other.past, other.width)], spare)
        mask = self.mask.new_zeros((len(self.ids) + len(other.ids), width + spare))
        mask[: len(self.ids), width - self.width : width] = self.mask[:, : self.width]
        mask[len(self.ids) :, width - other.width : width] = other.mask[:, : other.width]
        self.mask, self.width = mask, width
        self.ids += other.ids
        self.live += other.live
        self.seeds = np.concatenate([self.seeds, other.seeds])
        for name in ("positions", "recent", "logits", "temperature", "steps"):
            setattr(self, name, torch.cat([getattr(self, name), getattr(other, name)]))
        if self.guard is not None and other.guard is not None:
            self.guard.extend(other.guard)


class _Engine:
    def __init__(self, model: Any, requests: list[Request], params: SamplingParams, stop_ids: Sequence[int],
                 pad_id: int, keep_cache: bool, guard: TagGuard | None) -> None:
        self.model, self.requests, self.params = model, requests, params
        self.stop_ids, self.pad_id = list(stop_ids), pad_id
        self.keep_cache, self.tag_guard = keep_cache, guard
        self.stops = torch.tensor(sorted(set(stop_ids)), dtype=torch.long)
        self.device = model.device
        self.fused = decoder_for(model)  # the fused decode step, or None: HF's forward (see fused)
        self.layers = model.config.get_text_config(decoder=True).num_hidden_layers
        self.tail = GuardState(guard, 0, params.max_new_tokens).tail if guard is not None else 1
        self.tokens: dict[int, list[int]] = {}
        self.logprobs: dict[int, list[float]] = {}

    def prefill(self, ids: list[int]) -> _Rows:
        """The requests `ids` as a new batch: their uncached tokens through the model, logits pending."""
        contexts = [list(self.requests[i].context) for i in ids]
        caches = [self.requests[i].cache for i in ids]
        plan = layout(contexts, caches)
        width = plan.width_cached + plan.width_new
        spare = plan.width_new + self.params.max_new_tokens + 1
        input_ids, mask, past = build_inputs(contexts, caches, plan, self.pad_id, self.layers, spare)
        positions = (mask.cumsum(-1) - 1).clamp_(min=0)
        fed = slice(plan.width_cached, width)  # the cached columns are in `past` already
        out = self.model(input_ids=input_ids[:, fed].to(self.device), attention_mask=mask.to(self.device),
                         position_ids=positions[:, fed].to(self.device), past_key_values=past, use_cache=True,
                         logits_to_keep=1)
        recent = torch.full((len(ids), self.tail), self.pad_id, dtype=torch.long)
        for row, ctx in enumerate(contexts):
            last = torch.tensor(ctx[-self.tail :], dtype=torch.long)
            recent[row, self.tail - len(last) :] = last
        guard = GuardState(self.tag_guard, len(ids), self.params.max_new_tokens) if self.tag_guard else None
        grown = mask.new_zeros((len(ids), width + self.params.max_new_tokens))
        grown[:, :width] = mask
        return _Rows(self, list(ids), past, width, grown, mask.sum(-1), recent,
                     out.logits[:, -1, :].float().cpu(), guard)

    def finish(self, rows: _Rows, slot: int) -> Generation:
        index = rows.ids[slot]
        tokens = self.tokens.pop(index)
        forced = rows.guard is not None and bool(rows.guard.forcing[slot] >= 0)
        cut = rows.guard is not None and bool(rows.guard.cut[slot])
        gen = Generation(token_ids=tokens, logprobs=self.logprobs.pop(index),
                         stopped=tokens[-1] in self.stop_ids, forced_close=forced, cut_mid_sentence=cut)
        if self.keep_cache:  # the last chosen token never went through the model
            gen.cache = extract_columns(rows.past, slot, rows.mask[slot, : rows.width].nonzero().squeeze(1))
        return gen


def generate(model: Any, requests: Sequence[Request], params: SamplingParams, *, stop_ids: Sequence[int],
             pad_id: int, keep_cache: bool = False, guard: TagGuard | None = None,
             on_finish: FollowUp | None = None, slots: int | None = None) -> list[Generation]:
    """Generate every request, and every follow-up `on_finish(index, generation)` hands back (appended,
    index = its position); returns one Generation per request in that order. At most `slots` rows run
    at once (default: as many as the first requests)."""
    queue = list(requests)
    if not queue:
        return []
    if any(len(r.context) == 0 for r in queue):
        raise ValueError("every context needs at least one token")
    if params.do_sample and any(r.seed is None for r in queue):
        raise ValueError("sampling needs a seed for every request")
    engine = _Engine(model, queue, params, stop_ids, pad_id, keep_cache, guard)
    results: dict[int, Generation] = {}
    waiting = deque(range(len(queue)))
    limit = slots or len(queue)
    rows: _Rows | None = None
    contiguous_lm_head(model)
    with torch.inference_mode(), grouped_attention(model):  # see attention: padded batches
        while True:
            running = sum(rows.live) if rows is not None else 0
            joining = [waiting.popleft() for _ in range(min(len(waiting), limit - running))]
            if joining:
                fresh = engine.prefill(joining)
                if rows is None or not any(rows.live):
                    rows = fresh
                else:
                    rows.keep([s for s, alive in enumerate(rows.live) if alive])
                    rows.extend(fresh)
                for i in joining:
                    engine.tokens[i], engine.logprobs[i] = [], []
            if rows is None or not any(rows.live):
                break
            chosen, logprob = rows.choose()
            ended = torch.isin(chosen, engine.stops) | (rows.steps + 1 >= params.max_new_tokens)
            for slot, (token, lp) in enumerate(zip(chosen.tolist(), logprob.tolist(), strict=True)):
                if not rows.live[slot]:
                    continue
                index = rows.ids[slot]
                engine.tokens[index].append(token)
                engine.logprobs[index].append(lp)
                if bool(ended[slot]):
                    rows.live[slot] = False
                    results[index] = engine.finish(rows, slot)
                    follow = on_finish(index, results[index]) if on_finish is not None else None
                    if follow is not None:
                        queue.append(follow)  # the engine's own list: it reads follow-ups from it
                        waiting.append(len(queue) - 1)
            rows.steps += 1
            if not any(rows.live):
                rows = None
                continue
            dead = rows.live.count(False)
            if dead and (dead >= COMPACT_SHARE * len(rows.live) or waiting):
                alive = [s for s, live in enumerate(rows.live) if live]
                chosen = chosen.index_select(0, torch.tensor(alive, dtype=torch.long))
                rows.keep(alive)
            rows.feed(chosen)
    return [results[i] for i in range(len(queue))]


def generate_batch(
    model: PreTrainedModel,
    contexts: Sequence[Sequence[int]],
    params: SamplingParams,
    *,
    stop_ids: Sequence[int],
    pad_id: int,
    seeds: Sequence[int] | None = None,
    caches: Sequence[RowCache | None] | None = None,
    keep_cache: bool = False,
    guard: TagGuard | None = None,
) -> list[Generation]:
    """Continue every context; rows stop at any of `stop_ids` and leave the batch as they finish.

    `caches[i]`, when given, holds the keys/values of a prefix of `contexts[i]` (from an earlier
    round), so only the rest is prefilled; `keep_cache` returns each row's updated cache. `guard`
    applies a `TagGuard` (see there). See `scheduler.generate` for requests that spawn follow-ups.
    """
    caches = list(caches) if caches is not None else [None] * len(contexts)
    if len(caches) != len(contexts):
        raise ValueError(f"{len(caches)} caches for {len(contexts)} contexts")
    if params.do_sample and (seeds is None or len(seeds) != len(contexts)):
        raise ValueError(f"sampling needs one seed per context ({len(contexts)}), "
                         f"got {None if seeds is None else len(seeds)}")
    requests = [Request(ctx, None if seeds is None else int(seeds[i]), caches[i])
                for i, ctx in enumerate(contexts)]
    return generate(model, requests, params, stop_ids=stop_ids, pad_id=pad_id, keep_cache=keep_cache,
                    guard=guard)
