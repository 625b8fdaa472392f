"""The `llm` backend: an OpenAI-compatible chat endpoint writes the reasoning, a few requests at a time.

An unreachable or failing endpoint stops the run with an error naming the endpoint and the turn
(nothing is half-written: the stage writes its outputs only at the end). A reply that is empty or
repeats the message falls back to the template backend for that turn, counted in `stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from mimesis_rl.behavior.openai_client import ChatClient, EndpointError
from mimesis_rl.behavior.reasoning.base import BatchRationalizer
from mimesis_rl.behavior.reasoning.checks import DEFAULT_MAX_OVERLAP
from mimesis_rl.behavior.reasoning.context import TurnContext
from mimesis_rl.behavior.reasoning.prompt import messages_for


class LLMRationalizer(BatchRationalizer):
    """Reasoning from a remote chat model; `concurrency` requests are in flight at once."""

    name = "llm"

    def __init__(self, client: ChatClient, *, fallback: BatchRationalizer, concurrency: int = 4,
                 temperature: float = 0.7, max_tokens: int = 120, batch_size: int = 32,
                 max_overlap: float = DEFAULT_MAX_OVERLAP, keep_existing: bool = True,
                 min_words: int = 3) -> None:
        super().__init__(batch_size=batch_size, max_overlap=max_overlap, keep_existing=keep_existing,
                         fallback=fallback, min_words=min_words, first_person=True)
        self.client = client
        self.concurrency = max(1, concurrency)
        self.options = {"temperature": temperature, "max_tokens": max_tokens}

    def _one(self, ctx: TurnContext) -> str:
        try:
            return self.client.chat(messages_for(ctx), **self.options)
        except EndpointError as exc:
            where = f"conversation {ctx.conversation_id!r} turn {ctx.turn_index}"
            raise EndpointError(f"llm reasoning for {where}: {exc}") from exc

    def write(self, contexts: Sequence[TurnContext]) -> list[str | None]:
        if self.concurrency == 1 or len(contexts) == 1:
            return [self._one(ctx) for ctx in contexts]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(contexts))) as pool:
            return list(pool.map(self._one, contexts))
