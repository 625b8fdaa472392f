"""The agent's turns on TRL's vLLM generation (`GRPOTrainer.vllm_generation`), for GPUs.

`agent_rl` plays its dialogues through the rollout engine whatever generates the policy's tokens.
On CPU that is our engine (`ModelRunner`); with `agent_rl.vllm.use_vllm` on a GPU, TRL keeps a vLLM
copy of the policy in sync with the training weights before each `rollout_func` call, and
`VLLMRunner` hands each round's agent contexts to it. It has `ModelRunner`'s shape (`chat`, `fits`,
`generate` -> `Generation`s), so `ModelAgent`, the token tracks, the env mask, the recorded log-probs
and CSD's note splicing are the same code on both paths.

What differs from the CPU path, by design of vLLM:
- no KV reuse between rounds in this process (vLLM's own prefix cache does that on its side);
- no per-row seeds: vLLM samples with its own generator, so a dialogue's transcript depends on what
  else shares the call (the CPU path's seeded-alone-or-in-a-batch guarantee does not hold here);
- in TRL's `server` mode every training process must make the same number of calls (they gather);
  the lockstep engine's rounds differ per process when dialogues end at different turns, so use
  `colocate` mode (tensor_parallel_size 1) with several training processes, `server` with one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.chat import ChatFormat
from mimesis_rl.models.inference.generation import Generation
from mimesis_rl.models.inference.kvcache import RowCache
from mimesis_rl.models.inference.runner import fitting


class VLLMRunner:
    """`ModelRunner`'s interface over TRL's `VLLMGeneration`: one batched vLLM call per round.

    generation: the trainer's `vllm_generation` (TRL samples with the trainer's temperature, top_p,
        top_k and min_p; those come from `GRPOConfig`, not from `sampling`).
    sampling: only `max_new_tokens` is read: the per-turn budget, set on the vLLM call (TRL's own
        budget, `max_completion_length`, is the whole completion's).
    """

    reuse_cache = False
    guard = None

    def __init__(self, generation: Any, tokenizer: Any, sampling: SamplingParams, max_context: int) -> None:
        self.generation = generation
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.max_context = max_context
        self.chat = ChatFormat(tokenizer)
        self.batch_sizes: list[int] = []
        self.prefill_tokens: list[int] = []
        self.call_seconds: list[float] = []

    def fits(self, context_len: int) -> bool:
        return context_len + self.sampling.max_new_tokens <= self.max_context

    @contextmanager
    def _turn_budget(self) -> Iterator[None]:
        """TRL's vLLM call reads its token budget from the object; a turn's is shorter."""
        whole = self.generation.max_completion_length
        self.generation.max_completion_length = self.sampling.max_new_tokens
        try:
            yield
        finally:
            self.generation.max_completion_length = whole

    def generate(
        self,
        contexts: Sequence[list[int]],
        seed_keys: Sequence[object],
        caches: Sequence[RowCache | None] | None = None,
        sampling: SamplingParams | None = None,
    ) -> list[Generation | None]:
        """One vLLM call over the contexts that fit; None for a context too long to continue."""
        if sampling is not None and sampling != self.sampling:
            raise ValueError("the vLLM agent samples with the trainer's settings; no per-call override")
        fit = fitting(contexts, self.sampling.max_new_tokens, self.max_context)
        out: list[Generation | None] = [None] * len(contexts)
        if not fit:
            return out
        self.batch_sizes.append(len(fit))
        self.prefill_tokens.append(sum(len(contexts[i]) for i in fit))
        start = time.perf_counter()
        with self._turn_budget():
            _, completion_ids, logprobs, _ = self.generation.generate(
                prompts=[list(contexts[i]) for i in fit], images=None, num_generations=1)
        self.call_seconds.append(round(time.perf_counter() - start, 3))
        stops = set(self.chat.stop_ids)
        for i, ids, lps in zip(fit, completion_ids, logprobs, strict=True):
            ids = [int(t) for t in ids]
            stop = next((k for k, t in enumerate(ids) if t in stops), None)
            if stop is not None:  # the turn ends at its first stop token, as our engine's do
                ids = ids[: stop + 1]
            # TRL returns, per token, the sampled token's log-prob first (then top-k extras if asked)
            values = [float(row[0]) if isinstance(row, list | tuple) else float(row) for row in lps]
            values = values[: len(ids)]
            out[i] = Generation(token_ids=ids, logprobs=values, stopped=stop is not None)
        return out
