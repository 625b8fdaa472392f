"""The CSD coach: one short note per agent turn, written from what the agent could not see.

After a rollout, for each agent turn the coach reads the user's *following* turns (their private
reasoning, their messages, the behaviour patterns they showed), the goal card with its private
slots, and whether the dialogue ended; it writes advice for that turn ("the user is holding back
their budget; ask about it before you propose"). The notes feed the CSD teacher (`agent.csd`).

Three backends, like the reasoning writers (`behavior.reasoning`):

- `template`: deterministic, from the patterns, a small cue lexicon over the reasoning, the private
  slots (by label, never by value) and numeric hints (direction only: "they will not pay that much");
- `model`: the base model prompted with the same facts (adapters off); a note that comes back empty or
  too short falls back to the template note for that turn;
- `llm`: an OpenAI-compatible endpoint (`behavior.openai_client`), same prompt and fallback.

Notes must tell the agent what to do, not hand it the hidden facts: `leaks` finds private slot values
written verbatim in a note, and `redact` replaces them by the slot's label. The CSD driver measures
the raw leak rate per backend and redacts before the note reaches the teacher.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from mimesis_rl.behavior.openai_client import ChatClient, ChatClientSettings, EndpointError
from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import EpisodeState, TraceTurn

MAX_NOTE_WORDS = 40

# What a user showing a pattern in the next turn asks of the agent now (the pattern is never named).
PATTERN_ADVICE: dict[str, str] = {
    "vague_request": "Their request is vague; ask one clarifying question before you act.",
    "implicit_preference": "They hint at a preference without stating it; name it back and check.",
    "withholding_info": "They will dodge a direct question; explain why you ask, or offer options instead.",
    "privacy_concern": "They do not want to share personal details; say why you need them or do without.",
    "refusal": "They will refuse this as it stands; change the proposal rather than repeating it.",
    "criticism": "They are unhappy with your answer; acknowledge it and fix the point they object to.",
    "pushback": "They will contest this; give a concrete reason instead of insisting.",
    "intent_change": "Their goal is about to change; confirm what they want now before acting.",
    "goal_ambiguity": "They are torn between options; lay out the trade-off and let them choose.",
    "emotional_expression": "They are getting emotional; acknowledge it briefly, then move things forward.",
    "incomplete_utterance": "They answer in fragments; ask a short, specific question.",
    "negotiation": "They will haggle; leave room to concede and move in small steps.",
    "follow_up_probe": "They want details; explain your reasoning or specifics, briefly.",
}

# Cues read from the private reasoning when a user side does not label its turns (learned simulators).
REASONING_CUES: tuple[tuple[str, str], ...] = (
    (
        r"\b(rather not|won'?t (say|tell|share)|keep (it|that) to myself|not (going to|gonna) (say|tell))",
        "withholding_info",
    ),
    (r"\b(too (expensive|pricey|much)|cheaper|lower (price|offer)|overpriced)", "negotiation"),
    (r"\b(not sure|undecided|can'?t decide|torn|either)\b", "goal_ambiguity"),
    (r"\b(annoy|frustrat|impatien|angry|upset|fed up)", "emotional_expression"),
    (r"\b(changed? my mind|instead|actually i want)", "intent_change"),
    (r"\b(why (do|does|would)|explain|what do you mean)", "follow_up_probe"),
    (r"\b(no way|not interested|don'?t want|refuse|reject)", "refusal"),
    (r"\b(privacy|personal|my (address|phone|email))", "privacy_concern"),
)


@dataclass
class CoachContext:
    """What the coach may read about one agent turn (hindsight the agent did not have)."""

    episode_id: str
    domain: str
    goal: GoalCard
    turn: int  # 0-based index of the agent turn in the dialogue
    agent_message: str
    action: dict[str, Any] | None
    later: list[TraceTurn]  # the user's following turns (up to the horizon), reasoning included
    ended_after: str | None  # "user_left" / "accepted" / ... when the dialogue ended within the horizon
    slot_labels: dict[str, str] = field(default_factory=dict)

    def label(self, slot: str) -> str:
        return self.slot_labels.get(slot, slot.replace("_", " "))


def _slot_labels(domain: str) -> dict[str, str]:
    try:
        from mimesis_rl.envs.registry import DOMAINS
    except ImportError:  # pragma: no cover - envs is below agent, always importable
        return {}
    d = DOMAINS.get(domain)
    return dict(d.user_policy.slot_labels) if d else {}


def contexts_from_trace(
    episode_id: str,
    domain: str,
    goal: GoalCard,
    trace: Sequence[TraceTurn],
    end_reason: str | None,
    horizon: int = 2,
) -> list[CoachContext]:
    """One context per assistant turn of the trace, in order; `horizon` later user turns each."""
    if horizon < 1:
        raise ValueError(f"coach horizon must be >= 1, got {horizon}")
    labels = _slot_labels(domain)
    out: list[CoachContext] = []
    agent_index = [i for i, t in enumerate(trace) if t.role == "assistant"]
    for k, i in enumerate(agent_index):
        later = [t for t in trace[i + 1 :] if t.role == "user"][:horizon]
        last_in_horizon = i + 1
        seen = 0
        for j in range(i + 1, len(trace)):
            if trace[j].role == "user":
                seen += 1
                if seen == horizon:
                    last_in_horizon = j
                    break
            last_in_horizon = j
        ended = end_reason if last_in_horizon >= len(trace) - 1 else None
        out.append(
            CoachContext(
                episode_id=episode_id,
                domain=domain,
                goal=goal,
                turn=k,
                agent_message=trace[i].content,
                action=trace[i].meta.get("action"),
                later=later,
                ended_after=ended,
                slot_labels=labels,
            )
        )
    return out


def contexts_from_state(state: EpisodeState, horizon: int = 2) -> list[CoachContext]:
    """Coach contexts of a finished episode (`RolloutResult.states`)."""
    return contexts_from_trace(
        state.episode_id, state.domain, state.goal, state.trace, state.end_reason, horizon
    )


def contexts_from_record(record: Mapping[str, Any], horizon: int = 2) -> list[CoachContext]:
    """Coach contexts of a transcript record (`RolloutResult.records()`), for offline coaching."""
    where = f"episode {record.get('episode_id', '?')!r}"
    try:
        trace = [TraceTurn(**t) for t in record["turns"]]
        goal = GoalCard.model_validate(record["goal"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: not a transcript record ({exc})") from exc
    return contexts_from_trace(
        str(record["episode_id"]), str(record["domain"]), goal, trace, record.get("end_reason"), horizon
    )


# ---------------------------------------------------------------------------------------------
# Leak check


def _values(value: Any) -> list[str]:
    """The verbatim strings a slot value could appear as in text."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        number = float(value)
        text = str(int(number)) if number.is_integer() else f"{number:g}"
        return [text] if len(text) >= 2 else []  # one digit is everywhere ("1 question")
    if isinstance(value, str):
        text = value.strip()
        return [text] if len(text) >= 3 else []
    if isinstance(value, Mapping):
        return [v for item in value.values() for v in _values(item)]
    if isinstance(value, (list, tuple, set)):
        return [v for item in value for v in _values(item)]
    return []


def _pattern(text: str) -> re.Pattern[str]:
    if re.fullmatch(r"[\d.]+", text):
        return re.compile(rf"(?<![\d.]){re.escape(text)}(?![\d]|\.\d)")
    return re.compile(rf"(?<!\w){re.escape(text)}(?!\w)", re.IGNORECASE)


def leaks(note: str, goal: GoalCard) -> list[str]:
    """Private slot names whose value the note writes verbatim (numbers as numbers, words case-blind)."""
    found = []
    for slot in goal.private:
        if any(_pattern(v).search(note) for v in _values(goal.slots.get(slot))):
            found.append(slot)
    return found


def redact(note: str, goal: GoalCard, labels: Mapping[str, str] | None = None) -> str:
    """The note with every private slot value replaced by "their <label>"."""
    labels = labels or {}
    for slot in goal.private:
        for value in sorted(_values(goal.slots.get(slot)), key=len, reverse=True):
            label = labels.get(slot, slot.replace("_", " "))
            note = _pattern(value).sub(f"their {label}", note)
            note = note.replace("$their", "their")
    return note


def clean_note(text: str | None, max_words: int = MAX_NOTE_WORDS) -> str:
    """One paragraph, no tags, at most `max_words` words."""
    if not text:
        return ""
    text = re.sub(r"</?\w+[^>]*>", " ", text).strip().split("\n\n")[0]
    text = re.sub(r"^(coach(ing)? note|note|advice|instruction)\s*:\s*", "", text.strip(), flags=re.I)
    words = text.split()
    if len(words) > max_words:
        words = words[:max_words]
    return " ".join(words).strip().strip('"').strip()


# ---------------------------------------------------------------------------------------------
# Backends


@runtime_checkable
class Coach(Protocol):
    """Writes one note per context, in order."""

    name: str

    def notes(self, contexts: Sequence[CoachContext]) -> list[str]: ...


def _patterns(ctx: CoachContext) -> list[str]:
    """Patterns the following user turns show: labelled ones first, then cues read from reasoning."""
    seen: list[str] = []
    for turn in ctx.later:
        for p in turn.patterns:
            if p in PATTERN_ADVICE and p not in seen:
                seen.append(p)
    for turn in ctx.later:
        text = f"{turn.reasoning or ''}"
        for rx, name in REASONING_CUES:
            if name not in seen and re.search(rx, text, re.IGNORECASE):
                seen.append(name)
    return seen


def _first_number(action: Mapping[str, Any] | None) -> float | None:
    for key, value in (action or {}).items():
        if key != "type" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


class TemplateCoach:
    """Deterministic notes: hidden-slot cue, numeric direction, pattern advice, ending cue."""

    name = "template"

    def __init__(self, max_patterns: int = 2, max_words: int = MAX_NOTE_WORDS) -> None:
        self.max_patterns = max_patterns
        self.max_words = max_words

    def note(self, ctx: CoachContext) -> str:
        parts: list[str] = []
        later_text = " ".join(f"{t.reasoning or ''} {t.content}" for t in ctx.later)
        patterns = _patterns(ctx)
        for slot in ctx.goal.private:
            label = ctx.label(slot)
            value = ctx.goal.slots.get(slot)
            offered = _first_number(ctx.action)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and offered is not None:
                if offered > value:
                    parts.append(
                        f"Your {ctx.action.get('type', 'proposal')} is above their hidden {label}; "
                        "they will not accept it, so come down."
                    )
                else:
                    parts.append(f"They could go higher than that on their {label}; do not concede more.")
                continue
            mentioned = re.search(re.escape(label), later_text, re.IGNORECASE) or leaks(
                later_text, GoalCard(text="", slots={slot: value}, private=[slot])
            )
            if mentioned or {"withholding_info", "privacy_concern"} & set(patterns):
                parts.append(
                    f"The user is keeping their {label} to themselves; ask about it before you propose."
                )
        parts += [PATTERN_ADVICE[p] for p in patterns[: self.max_patterns]]
        if ctx.ended_after == "user_left":
            parts.append("They are about to leave; make your best concrete proposal now.")
        elif ctx.ended_after == "accepted":
            parts.append("This is working; keep the same approach.")
        if not parts:
            parts.append("Find out what matters most to the user before you act.")
        return clean_note(" ".join(parts), self.max_words)

    def notes(self, contexts: Sequence[CoachContext]) -> list[str]:
        return [self.note(ctx) for ctx in contexts]


COACH_SYSTEM = (
    "You coach a conversational agent. You see what the user privately thought and said after the "
    "agent's message, which the agent could not see. Write ONE short instruction (at most 25 words) "
    "telling the agent what to do differently in that message. Never write numbers, prices or exact "
    "private details; describe them instead (for example 'their budget is lower than your offer')."
)


def coach_messages(ctx: CoachContext) -> list[dict[str, str]]:
    """The prompt the `model` and `llm` backends get (the same facts the template reads)."""
    hidden = ", ".join(ctx.label(s) for s in ctx.goal.private) or "nothing"
    lines = [
        f"Task domain: {ctx.domain}.",
        f"The user privately keeps back: {hidden}.",
        f"Agent said: {ctx.agent_message.strip()[:400]}",
    ]
    for turn in ctx.later:
        if turn.reasoning:
            lines.append(f"User privately thought: {turn.reasoning.strip()[:300]}")
        lines.append(f"User then said: {turn.content.strip()[:300]}")
    if ctx.ended_after:
        lines.append(f"The dialogue then ended ({ctx.ended_after}).")
    lines.append("Instruction for the agent:")
    return [{"role": "system", "content": COACH_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


class _Fallback:
    """Shared rule: a note shorter than `min_words` is replaced by the template's note (counted)."""

    name = "fallback"

    def __init__(self, fallback: TemplateCoach | None, min_words: int) -> None:
        self.fallback = fallback or TemplateCoach()
        self.min_words = min_words
        self.fallbacks = 0
        self.written = 0

    def _checked(self, contexts: Sequence[CoachContext], raw: Sequence[str | None]) -> list[str]:
        out = []
        for ctx, text in zip(contexts, raw, strict=True):
            note = clean_note(text)
            if len(note.split()) < self.min_words:
                self.fallbacks += 1
                note = self.fallback.note(ctx)
            else:
                self.written += 1
            out.append(note)
        return out


class ModelCoach(_Fallback):
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


class LLMCoach(_Fallback):
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


COACHES = ("template", "model", "llm")


def build_coach(
    backend: str,
    section: Mapping[str, Any] | None = None,
    *,
    model: Any = None,
    tokenizer: Any = None,
    seed: int = 0,
) -> Coach:
    """A coach from `agent_rl.csd.coach` (+ its `model:`/`llm:` subsection); the model backend reuses
    the trainer's model (adapters off) and tokenizer."""
    section = dict(section or {})
    if backend == "template":
        return TemplateCoach(**section)
    if backend == "model":
        if model is None or tokenizer is None:
            raise ValueError("coach backend 'model' needs the policy model and tokenizer")
        return ModelCoach(model, tokenizer, seed=seed, **section)
    if backend == "llm":
        client_keys = {
            "base_url_env",
            "model_env",
            "api_key_env",
            "base_url",
            "model",
            "timeout_s",
            "max_retries",
            "backoff_s",
        }
        client = ChatClient(
            ChatClientSettings.from_section(
                {k: v for k, v in section.items() if k in client_keys}, where="agent_rl.csd.llm"
            )
        )
        return LLMCoach(client, **{k: v for k, v in section.items() if k not in client_keys})
    raise ValueError(f"agent_rl.csd.coach: unknown backend {backend!r}; known: {', '.join(COACHES)}")


def describe(notes: Sequence[str]) -> str:
    """Notes as a JSON list (for transcripts and debugging)."""
    return json.dumps(list(notes), ensure_ascii=False)
