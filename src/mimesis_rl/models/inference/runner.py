"""A model party's generator: one base model, an optional LoRA adapter, a chat format, a decoding setup.

Agent and simulator can share one base model: each `ModelRunner` names its adapter, and every
batched call switches to it (and back) around the one `generate` call, so the trainer's own
adapter state (active adapter, which one gets gradients) is left as it was found.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from peft import PeftModel
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.chat import ChatFormat
from mimesis_rl.models.inference.generation import Generation, Request, TagGuard
from mimesis_rl.models.inference.kvcache import RowCache, cached_prefix, supports_reuse
from mimesis_rl.models.inference.scheduler import generate_batch
from mimesis_rl.models.lora import active_adapter

log = logging.getLogger(__name__)


# One streamed item: (context, seed key, KV cache of a prefix or None, sampling override or None).
Turn = tuple[list[int], object, "RowCache | None", "SamplingParams | None"]


def derive_seed(*parts: object) -> int:
    """A stable 63-bit seed from any parts (same parts, same seed, on every machine and run)."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & (2**63 - 1)


def fitting(contexts: Sequence[list[int]], max_new_tokens: int, max_context: int) -> list[int]:
    """Indices of the contexts that leave room for `max_new_tokens` within `max_context` positions; the
    others are skipped with a warning (their turn comes back as None)."""
    fit = [i for i, ctx in enumerate(contexts) if len(ctx) + max_new_tokens <= max_context]
    if len(fit) < len(contexts):
        log.warning("%d context(s) too long for %d new tokens within %d positions; those turns are skipped",
                    len(contexts) - len(fit), max_new_tokens, max_context)
    return fit


@dataclass
class ModelRunner:
    """Everything one model-backed party needs to generate turns.

    adapter: the LoRA adapter to activate on a PeftModel; None runs the bare base (adapters off).
    seed: mixed into every row's sampling seed, so two runners with different seeds sample apart.
    max_context: longest context (prompt + turn) allowed; defaults to the model's position limit.
    reuse_cache: keep each dialogue's KV cache between rounds (see `kvcache`), where the model allows.
    guard: decoding rules of a reasoning-then-message turn (the simulator's; see `TagGuard`).
    """

    model: PreTrainedModel | PeftModel
    tokenizer: PreTrainedTokenizerBase
    sampling: SamplingParams = SamplingParams()
    adapter: str | None = None
    seed: int = 0
    max_context: int | None = None
    reuse_cache: bool = True
    guard: TagGuard | None = None

    def __post_init__(self) -> None:
        self.chat = ChatFormat(self.tokenizer)
        if self.adapter is not None:
            if not isinstance(self.model, PeftModel):
                raise ValueError(
                    f"adapter {self.adapter!r} requested but the model has no LoRA adapters loaded"
                )
            if self.adapter not in self.model.peft_config:
                raise ValueError(
                    f"adapter {self.adapter!r} is not loaded; loaded: {sorted(self.model.peft_config)}"
                )
        if self.max_context is None:
            self.max_context = int(getattr(self.model.config, "max_position_embeddings", 0) or 2**31)
        self.batch_sizes: list[int] = []  # rows per generate call, for benchmarks and tests
        self.prefill_tokens: list[int] = []  # tokens fed through the model before decoding, per call
        self.call_seconds: list[float] = []  # wall time of each generate call
        self.reuse_cache = self.reuse_cache and supports_reuse(self.model)

    @contextmanager
    def weights(self) -> Iterator[None]:
        """This party's weights active on the shared model (its adapter, or the bare base)."""
        if self.adapter is not None:
            with active_adapter(self.model, self.adapter):
                yield
        elif isinstance(self.model, PeftModel):
            with self.model.disable_adapter():
                yield
        else:
            with nullcontext():
                yield

    def fits(self, context_len: int) -> bool:
        return context_len + self.sampling.max_new_tokens <= int(self.max_context or 0)

    def generate(
        self,
        contexts: Sequence[list[int]],
        seed_keys: Sequence[object],
        caches: Sequence[RowCache | None] | None = None,
        sampling: SamplingParams | None = None,
    ) -> list[Generation | None]:
        """One batched generate over the contexts that fit; None for a context too long to continue.

        `caches[i]` is the row's cache from its previous turn (used when `reuse_cache`); each
        Generation then carries the row's new cache. `sampling` overrides the runner's settings for
        this call (a re-sample's hotter temperature); its max_new_tokens must be the runner's.
        """
        if sampling is not None and sampling.max_new_tokens != self.sampling.max_new_tokens:
            raise ValueError("a per-call sampling override must keep the runner's max_new_tokens")
        fit = fitting(contexts, self.sampling.max_new_tokens, int(self.max_context or 0))
        out: list[Generation | None] = [None] * len(contexts)
        if not fit:
            return out
        seeds = [derive_seed(self.seed, seed_keys[i]) for i in fit]
        self.batch_sizes.append(len(fit))
        rows = [caches[i] if caches is not None and self.reuse_cache else None for i in fit]
        self.prefill_tokens.append(
            sum(len(contexts[i]) - cached_prefix(contexts[i], c) for i, c in zip(fit, rows, strict=True))
        )
        was_training = self.model.training
        self.model.eval()
        try:
            with self.weights():
                start = time.perf_counter()
                gens = generate_batch(
                    self.model,
                    [contexts[i] for i in fit],
                    sampling or self.sampling,
                    stop_ids=self.chat.stop_ids,
                    pad_id=self.chat.pad_id,
                    seeds=seeds,
                    caches=rows,
                    keep_cache=self.reuse_cache,
                    guard=self.guard,
                )
                self.call_seconds.append(round(time.perf_counter() - start, 3))
        finally:
            if was_training:
                self.model.train()
        for i, gen in zip(fit, gens, strict=True):
            out[i] = gen
        return out

    def stream(self, items: Sequence[Turn],
               on_finish: Callable[[int, Generation | None], Turn | None]) -> None:
        """Generate every item, and every follow-up `on_finish(index, generation)` hands back (indexed
        in the order they were handed in, after the items), in one continuously batched call: a
        follow-up takes the slot its parent freed while the rest of the batch decodes on.

        An item is (context, seed key, cache or None, sampling or None); `sampling` may change the
        temperature only. A context too long to continue finishes at once with None.
        """
        from mimesis_rl.models.inference.scheduler import generate

        turns: list[Turn] = list(items)
        engine_index: list[int] = []  # engine request -> item index

        def admit(index: int) -> Request | None:
            """The engine request for item `index`; an item that cannot fit finishes at once (None),
            and so may its follow-ups."""
            while True:
                context, key, cache, sampling = turns[index]
                if sampling is not None and sampling.max_new_tokens != self.sampling.max_new_tokens:
                    raise ValueError("a per-call sampling override must keep the runner's max_new_tokens")
                if self.fits(len(context)):
                    engine_index.append(index)
                    return Request(context, derive_seed(self.seed, key), cache if self.reuse_cache else None,
                                   sampling.temperature if sampling is not None else None)
                log.warning("a context of %d tokens is too long for %d new tokens within %d positions; "
                            "that turn is skipped", len(context), self.sampling.max_new_tokens,
                            self.max_context)
                nxt = on_finish(index, None)
                if nxt is None:
                    return None
                turns.append(nxt)
                index = len(turns) - 1

        requests = [r for r in (admit(i) for i in range(len(turns))) if r is not None]
        if not requests:
            return

        def follow(index: int, gen: Generation) -> Request | None:
            nxt = on_finish(engine_index[index], gen)
            if nxt is None:
                return None
            turns.append(nxt)
            return admit(len(turns) - 1)

        self.batch_sizes.append(len(requests))
        self.prefill_tokens.append(sum(len(r.context) - (r.cache.length if r.cache else 0) for r in requests))
        was_training = self.model.training
        self.model.eval()
        try:
            with self.weights():
                start = time.perf_counter()
                generate(self.model, requests, self.sampling, stop_ids=self.chat.stop_ids,
                         pad_id=self.chat.pad_id, keep_cache=self.reuse_cache, guard=self.guard,
                         on_finish=follow)
                self.call_seconds.append(round(time.perf_counter() - start, 3))
        finally:
            if was_training:
                self.model.train()
