"""The `llm` coach: an OpenAI-compatible endpoint (`behavior.openai_client`), requests in parallel."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from mimesis_rl.agent.coach.context import CoachContext
from mimesis_rl.agent.coach.prompt import TemplateFallback, coach_messages
from mimesis_rl.agent.coach.template import TemplateCoach
from mimesis_rl.behavior.openai_client import ChatClient, EndpointError


class LLMCoach(TemplateFallback):
    """An OpenAI-compatible endpoint; `concurrency` requests in flight; errors name the episode and turn."""

    name = "llm"

    def __init__(
        self,
        client: ChatClient,
        *,
        concurrency: int = 4,
        temperature: float = 0.7,
        max_tokens: int = 80,
        min_words: int = 4,
        fallback: TemplateCoach | None = None,
    ) -> None:
        super().__init__(fallback, min_words)
        self.client = client
        self.concurrency = max(1, concurrency)
        self.options = {"temperature": temperature, "max_tokens": max_tokens}

    def _one(self, ctx: CoachContext) -> str:
        try:
            return self.client.chat(coach_messages(ctx), **self.options)
        except EndpointError as exc:
            raise EndpointError(
                f"coach note for {ctx.episode_id!r} agent turn {ctx.turn + 1}: {exc}"
            ) from exc

    def notes(self, contexts: Sequence[CoachContext]) -> list[str]:
        if not contexts:
            return []
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(contexts))) as pool:
            raw = list(pool.map(self._one, contexts))
        return self._checked(contexts, raw)
