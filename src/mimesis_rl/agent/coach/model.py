"""The `model` coach: the base model (adapters off) prompted with the turn's facts, batched and seeded."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import torch

from mimesis_rl.agent.coach.context import CoachContext
from mimesis_rl.agent.coach.prompt import TemplateFallback, coach_messages
from mimesis_rl.agent.coach.template import TemplateCoach


class ModelCoach(TemplateFallback):
    """The base model prompted (adapters disabled when it is a PEFT model), batched, seeded."""

    name = "model"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 48,
        temperature: float = 0.7,
        do_sample: bool = True,
        batch_size: int = 8,
        max_prompt_tokens: int = 512,
        seed: int = 0,
        min_words: int = 4,
        fallback: TemplateCoach | None = None,
    ) -> None:
        super().__init__(fallback, min_words)
        self.model, self.tokenizer = model, tokenizer
        self.generation: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": do_sample}
        if do_sample:
            self.generation["temperature"] = temperature
        self.batch_size, self.max_prompt_tokens, self.seed = batch_size, max_prompt_tokens, seed
        self._batches = 0

    def _base(self) -> Any:
        disable = getattr(self.model, "disable_adapter", None)
        return disable() if callable(disable) else nullcontext()

    @torch.no_grad()
    def _write(self, contexts: Sequence[CoachContext]) -> list[str]:
        tok = self.tokenizer
        prompts = [
            tok.apply_chat_template(coach_messages(c), tokenize=False, add_generation_prompt=True)
            for c in contexts
        ]
        side, tok.padding_side = tok.padding_side, "left"
        tside, tok.truncation_side = tok.truncation_side, "left"
        try:
            batch = tok(
                prompts,
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_prompt_tokens,
                add_special_tokens=False,
            )
        finally:
            tok.padding_side, tok.truncation_side = side, tside
        device = next(self.model.parameters()).device
        batch = {k: v.to(device) for k, v in batch.items()}
        torch.manual_seed(self.seed + self._batches)
        self._batches += 1
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        was_training = self.model.training
        self.model.eval()
        try:
            with self._base():
                out = self.model.generate(**batch, **self.generation, pad_token_id=pad)
        finally:
            self.model.train(was_training)
        return tok.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)

    def notes(self, contexts: Sequence[CoachContext]) -> list[str]:
        raw: list[str] = []
        for start in range(0, len(contexts), self.batch_size):
            raw += self._write(contexts[start : start + self.batch_size])
        return self._checked(contexts, raw)
