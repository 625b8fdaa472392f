"""The `llm` labeler: any OpenAI-compatible `/v1/chat/completions` endpoint reads the turn in context and
answers JSON `{"patterns": {"<name>": <probability>, ...}}`.

The endpoint, model and key come from params plus the environment (`ChatClientConfig.from_section`);
connection errors, timeouts, 429 and 5xx are retried by the shared client, and an endpoint that
stays down raises `EndpointError` naming the URL and the turn. A reply that is not the JSON asked
for is asked again once, then raises `LLMAnswerError` naming the turn. Names outside the taxonomy
are dropped and counted (`stats`), never written.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.openai_client import ChatClient, EndpointError
from mimesis_rl.behavior.taxonomy import describe
from mimesis_rl.data.schema import PATTERN_NAMES

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You label the behaviour of a USER in a dialogue with an AGENT. Patterns (multi-label; most turns "
    "have zero, one or two):\n{taxonomy}\n\n"
    "Judge only the user's LAST message, in the light of the agent turn before it and the user's goal. "
    'Answer with JSON only, no prose: {{"patterns": {{"<pattern name>": <probability 0..1>, ...}}}} '
    "listing every pattern with probability >= 0.1; use exactly the names above."
)
_JSON = re.compile(r"\{.*\}", re.DOTALL)


class LLMAnswerError(ValueError):
    """The endpoint answered, but not with the JSON the prompt asks for."""


def render_turn(ctx: TurnInContext, max_chars: int = 1200) -> str:
    """The user message of the prompt: goal, the last agent turn, the message to label."""
    parts = []
    if ctx.goal is not None:
        parts.append(f"USER'S GOAL: {ctx.goal.text}")
    earlier = ctx.earlier_user[-2:]
    if earlier:
        parts.append("USER EARLIER: " + " | ".join(e[-200:] for e in earlier))
    parts.append(f"AGENT: {(ctx.last_agent or '(none: the user opens the conversation)')[-max_chars:]}")
    parts.append(f"USER (label this): {ctx.text[:max_chars]}")
    return "\n".join(parts)


def parse_answer(text: str) -> tuple[dict[str, float], list[str]]:
    """(pattern -> probability, unknown names) from the model's reply; raises LLMAnswerError if unusable."""
    cleaned = re.sub(r"^```(?:json)?|```$", "", text.strip(), flags=re.MULTILINE).strip()
    match = _JSON.search(cleaned)
    if not match:
        raise LLMAnswerError(f"no JSON object in the reply: {text[:200]!r}")
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise LLMAnswerError(f"malformed JSON in the reply ({exc.msg}): {text[:200]!r}") from None
    patterns: Any = data.get("patterns") if isinstance(data, dict) else None
    if isinstance(patterns, list):
        patterns = {str(name): 1.0 for name in patterns}
    if not isinstance(patterns, dict):
        raise LLMAnswerError(f'expected {{"patterns": {{name: probability}}}}, got: {text[:200]!r}')
    out: dict[str, float] = {}
    unknown: list[str] = []
    for name, value in patterns.items():
        if name not in PATTERN_NAMES:
            unknown.append(str(name))
            continue
        try:
            prob = float(value)
        except (TypeError, ValueError):
            raise LLMAnswerError(f"probability of {name!r} is not a number: {value!r}") from None
        out[name] = min(max(prob, 0.0), 1.0)
    return out, unknown


class LLMLabeler(Labeler):
    """Patterns from a remote chat model, `concurrency` requests in flight at once."""

    name = "llm"

    def __init__(
        self,
        client: ChatClient,
        *,
        concurrency: int = 4,
        temperature: float = 0.0,
        max_tokens: int = 200,
        thresholds: float = 0.5,
    ) -> None:
        super().__init__(thresholds)
        self.client = client
        self.concurrency = max(1, int(concurrency))
        self.options = {"temperature": temperature, "max_tokens": max_tokens}
        self.system = SYSTEM_PROMPT.format(taxonomy=describe(compact=False))
        self.stats: Counter[str] = Counter()

    def messages(self, ctx: TurnInContext) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": render_turn(ctx)}]

    def _one(self, ctx: TurnInContext) -> list[float]:
        where = ctx.where or "turn"
        last_error: LLMAnswerError | None = None
        for attempt in (1, 2):
            try:
                reply = self.client.chat(self.messages(ctx), **self.options)
            except EndpointError as exc:
                raise EndpointError(f"llm labeler, {where}: {exc}") from exc
            try:
                probs, unknown = parse_answer(reply)
            except LLMAnswerError as exc:
                last_error = exc
                self.stats["bad_answers"] += 1
                log.warning("llm labeler, %s: attempt %d: %s", where, attempt, exc)
                continue
            if unknown:
                self.stats["unknown_names"] += len(unknown)
                log.warning("llm labeler, %s: dropped names outside the taxonomy: %s", where, unknown)
            self.stats["turns"] += 1
            return [probs.get(name, 0.0) for name in PATTERN_NAMES]
        raise LLMAnswerError(f"llm labeler, {where}: {last_error}")

    def predict_proba(self, contexts: Sequence[TurnInContext]) -> np.ndarray:
        if not contexts:
            return np.zeros((0, len(PATTERN_NAMES)))
        if self.concurrency == 1 or len(contexts) == 1:
            rows = [self._one(ctx) for ctx in contexts]
        else:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(contexts))) as pool:
                rows = list(pool.map(self._one, contexts))
        return np.asarray(rows, dtype=float)

    def close(self) -> None:
        self.client.close()
