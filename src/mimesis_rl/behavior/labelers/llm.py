"""The `llm` labeler: any OpenAI-compatible `/v1/chat/completions` endpoint reads the turn in context and
answers JSON `{"patterns": {"<name>": <probability>, ...}}`.

By default (`instructions: guide`) the model gets what the gold set's independent second annotator
read: the labelling sections of `gold/GUIDE.md` (the when / when-not table, how to read a peer
negotiation, the co-occurrence rules) and the turn with its goal card and up to `history_turns`
earlier turns. That reader reproduced the gold at macro-F1 0.73 (CaSiNo) and 0.66 (chit-chat) where
the offline labelers reach about 0.4 on the same turns; `instructions: taxonomy` sends only the
pattern definitions with one example each (shorter prompts).

The endpoint, model and key come from params plus the environment (`ChatClientSettings.from_section`);
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
from pathlib import Path
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
GUIDE_PROMPT = (
    "You label the behaviour of a USER in a dialogue with an AGENT, following this labelling guide:\n\n"
    "{guide}\n\nThe patterns, with one example each:\n{taxonomy}\n\n"
    "Judge only the user's LAST message, in the light of the turns before it and the user's goal. "
    'Answer with JSON only, no prose: {{"patterns": {{"<pattern name>": <probability 0..1>, ...}}}} '
    "listing every pattern with probability >= 0.1; use exactly the pattern names of the guide."
)
INSTRUCTIONS = ("guide", "taxonomy")
GUIDE_SECTIONS = ("## How to label", "## How the items were chosen")  # from the first up to the second
_JSON = re.compile(r"\{.*\}", re.DOTALL)


def guide_instructions(path: str | Path | None = None) -> str:
    """The labelling sections of the gold guide (GUIDE.md from `## How to label` up to `## How the items
    were chosen`): the instructions the gold set's annotators followed."""
    from mimesis_rl.behavior.gold import GOLD_DIR

    path = Path(path) if path else GOLD_DIR / "GUIDE.md"
    text = path.read_text(encoding="utf-8")
    start, end = (text.find(marker) for marker in GUIDE_SECTIONS)
    if start < 0 or end <= start:
        raise ValueError(f"{path}: expected the sections {GUIDE_SECTIONS[0]!r} ... {GUIDE_SECTIONS[1]!r}")
    return text[start:end].strip()


class LLMAnswerError(ValueError):
    """The endpoint answered, but not with the JSON the prompt asks for."""


def render_turn(ctx: TurnInContext, max_chars: int = 1200, history_turns: int = 0) -> str:
    """The user message of the prompt: the goal, the turns before the message and the message to label.
    history_turns 0: the user's two previous messages and the last agent turn only; else the last
    `history_turns` turns in order (the last agent turn always among them)."""
    parts = []
    if ctx.goal is not None:
        parts.append(f"USER'S GOAL: {ctx.goal.text}")
    if history_turns > 0:
        shown = list(ctx.history[-history_turns:])
        if ctx.last_agent is not None and not any(t.role == "assistant" for t in shown):
            shown = [next(t for t in reversed(ctx.history) if t.role == "assistant"), *shown[1:]]
        if len(ctx.history) > len(shown):
            parts.append(f"({len(ctx.history) - len(shown)} earlier turns not shown)")
        for turn in shown:
            who = "AGENT" if turn.role == "assistant" else "USER"
            parts.append(f"{who}: {turn.content[-max_chars:]}")
        if ctx.last_agent is None:
            parts.append("AGENT: (none: the user opens the conversation)")
    else:
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
        instructions: str = "guide",
        history_turns: int = 6,
    ) -> None:
        super().__init__(thresholds)
        if instructions not in INSTRUCTIONS:
            known = ", ".join(INSTRUCTIONS)
            raise ValueError(f"label.llm.instructions: unknown {instructions!r}; known: {known}")
        self.client = client
        self.concurrency = max(1, int(concurrency))
        self.options = {"temperature": temperature, "max_tokens": max_tokens}
        taxonomy = describe(compact=False)
        self.system = (
            GUIDE_PROMPT.format(guide=guide_instructions(), taxonomy=taxonomy)
            if instructions == "guide"
            else SYSTEM_PROMPT.format(taxonomy=taxonomy)
        )
        self.history_turns = max(0, int(history_turns))
        self.stats: Counter[str] = Counter()

    def messages(self, ctx: TurnInContext) -> list[dict[str, str]]:
        user = render_turn(ctx, history_turns=self.history_turns)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

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
