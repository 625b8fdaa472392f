"""The `model` backend: the shared base model, prompted with the turn's context, writes the reasoning.

Generation is batched (left padding). With a chat template, the answer is prefilled with "I", which
keeps a small model speaking as the user. A trace that comes back empty, too short, not in the first
person or repeating the message is replaced by the template backend's trace for that turn;
`stats.fallbacks` counts why.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch

from mimesis_rl.behavior.reasoning.base import BatchRationalizer
from mimesis_rl.behavior.reasoning.checks import DEFAULT_MAX_OVERLAP
from mimesis_rl.behavior.reasoning.context import TurnContext
from mimesis_rl.behavior.reasoning.prompt import messages_for, plain_prompt

log = logging.getLogger(__name__)
PREFILL = "I"


class ModelRationalizer(BatchRationalizer):
    """Reasoning from a local causal LM (any transformers model + tokenizer).

    Generation:
        max_new_tokens, do_sample, temperature, top_p: passed to `generate`.
        max_prompt_tokens: prompts are cut from the left beyond this (the message sits at the end);
            never more than the model's context minus `max_new_tokens`.
        seed: sampling is seeded per batch, so a run is reproducible for the same batches.
    """

    name = "model"

    def __init__(self, model: Any, tokenizer: Any, *, fallback: BatchRationalizer, batch_size: int = 8,
                 max_new_tokens: int = 64, do_sample: bool = True, temperature: float = 0.7,
                 top_p: float = 0.9, max_prompt_tokens: int = 768, seed: int = 0,
                 max_overlap: float = DEFAULT_MAX_OVERLAP, keep_existing: bool = True,
                 min_words: int = 3) -> None:
        super().__init__(batch_size=batch_size, max_overlap=max_overlap, keep_existing=keep_existing,
                         fallback=fallback, min_words=min_words, first_person=True)
        self.model = model
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        self.tokenizer.truncation_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.generation = {"max_new_tokens": max_new_tokens, "do_sample": do_sample}
        if do_sample:
            self.generation.update(temperature=temperature, top_p=top_p)
        context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        if context:
            max_prompt_tokens = min(max_prompt_tokens, int(context) - max_new_tokens)
        if max_prompt_tokens < 16:
            raise ValueError(f"model: only {max_prompt_tokens} prompt tokens fit the context; "
                             "lower max_new_tokens")
        self.max_prompt_tokens = max_prompt_tokens
        self.seed = seed
        self._batches = 0

    def prompt(self, ctx: TurnContext) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages_for(ctx), tokenize=False,
                                                      add_generation_prompt=True) + PREFILL
        return plain_prompt(ctx)

    @torch.inference_mode()
    def write(self, contexts: Sequence[TurnContext]) -> list[str | None]:
        prompts = [self.prompt(ctx) for ctx in contexts]
        batch = self.tokenizer(prompts, return_tensors="pt", padding=True, truncation=True,
                               max_length=self.max_prompt_tokens, add_special_tokens=False)
        device = next(self.model.parameters()).device
        batch = {key: value.to(device) for key, value in batch.items()}
        torch.manual_seed(self.seed + self._batches)
        self._batches += 1
        output = self.model.generate(**batch, **self.generation, pad_token_id=self.tokenizer.pad_token_id)
        new_tokens = output[:, batch["input_ids"].shape[1]:]
        texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        if not getattr(self.tokenizer, "chat_template", None):
            return texts
        # An empty continuation stays empty rather than becoming the bare prefill.
        return [PREFILL + text if text.strip() else text for text in texts]
