"""The `template` backend: deterministic, varied first-person traces built from the turn's context.

A trace is two to four sentences: the situation (opening, answering a question, reacting to an
offer, leaving, ...), one sentence per behaviour pattern on the turn (at most two), one about the
goal (a reason the corpus wrote down, a slot the message mentions, a private slot kept back) and,
sometimes, one from the persona. Choices come from a random generator seeded by the run seed, the
conversation id and the turn index, so the same input always gives the same trace.
"""

from __future__ import annotations

import hashlib
import random
import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

from mimesis_rl.behavior.reasoning import phrases
from mimesis_rl.behavior.reasoning.base import BatchRationalizer
from mimesis_rl.behavior.reasoning.checks import DEFAULT_MAX_OVERLAP, repetition_problem
from mimesis_rl.behavior.reasoning.context import (
    Reason,
    TurnContext,
    first_person,
    goal_reasons,
    is_reason_slot,
    last_question,
    mentions,
    plain_slots,
    sentences,
    shorten,
    slot_phrase,
    slot_touched,
)

MAX_PATTERN_SENTENCES = 2
CONNECTIVE_RATE = 0.3
_CONNECTIVES = ("So", "Honestly,", "Anyway,", "Also,", "Basically,", "And", "Plus,", "Really,")
# Sentence openers that stay correct when lower-cased after a connective (never names or items).
_OPENERS = """they their that this the nothing no time my now there a an what why after before if it's one
both part something keeping being our we're more enough behind picking starting first thinking actually short
scratch mentioning spelling telling underneath right since"""
_LOWER_OK = frozenset(_OPENERS.split())
ATTEMPTS = 8
# Fields quoted from the context are used once per trace, so nothing is said twice.
_SINGLE_USE = ("q", "said", "goal", "reason", "withheld", "action", "value", "slot", "trait")
_QUOTE_PATTERNS = ("withholding_info", "privacy_concern", "follow_up_probe", "refusal", "intent_change")
_EMOTION_WORDS = {
    "frustration": r"ugh|annoy|frustrat|ridiculous|seriously|useless|waste|angry|mad\b|hate|terrible|awful|"
                   r"sick of|fed up|come on|!!+",
    "worry": r"worr|afraid|nervous|anxious|scared|concern|uneasy|hope (it|this)|what if",
    "delight": r"great|awesome|love|amazing|perfect|wonderful|excited|yay|glad|happy|thanks|thank you|"
               r"nice|cool|haha|lol|:\)",
}
_FORMATTER = string.Formatter()
_RANK_ORDER = {"high": 0, "top": 0, "first": 0, "medium": 1, "second": 1, "low": 2, "third": 2, "last": 2}
_ACTIONS = {
    "submit_deal": "putting the deal in writing",
    "accept_deal": "accepting their deal",
    "reject_deal": "rejecting their deal",
    "walk_away": "walking away",
    "recommend": "going with a recommendation",
    "book": "booking it",
    "buy": "buying it",
    "cancel": "cancelling",
}


def _rng(seed: int, conversation_id: str, turn_index: int, attempt: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}|{conversation_id}|{turn_index}|{attempt}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _fields_of(template: str) -> set[str]:
    return {name for _, name, _, _ in _FORMATTER.parse(template) if name}


def _capitalise(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:] if sentence else sentence


def _clause(text: str, max_words: int = 30) -> str:
    """A corpus-written reason as a clause that reads inside our sentence."""
    text = " ".join(text.split()).strip().rstrip(".!")
    words = text.split()
    if len(words) > max_words:
        text = " ".join(words[:max_words]) + "…"
    if len(text) > 1 and text[0].isupper() and not text.startswith(("I ", "I'")) and text[1:2].islower():
        text = text[0].lower() + text[1:]
    return text


def emotion_of(message: str) -> str:
    """The feeling a message shows most plainly, from small lexicons (default: `feeling`)."""
    lowered = message.lower()
    for name, pattern in _EMOTION_WORDS.items():
        if re.search(pattern, lowered):
            return name
    return "feeling"


class Picker:
    """Fills sentences from phrase banks with the context's fields; quoted fields are used once."""

    def __init__(self, rng: random.Random, fields: Mapping[str, str | None]) -> None:
        self.rng = rng
        self.fields = {k: v for k, v in fields.items() if v}

    def pick(self, bank: Sequence[str], extra: Mapping[str, str] | None = None) -> str | None:
        fields = {**self.fields, **(extra or {})}
        usable = [t for t in bank if _fields_of(t) <= set(fields)]
        if not usable:
            return None
        # Sentences that use the context are worth more than generic ones.
        weights = [1 + 2 * len(_fields_of(t)) for t in usable]
        template = self.rng.choices(usable, weights=weights, k=1)[0]
        for name in _fields_of(template) & set(_SINGLE_USE):
            self.fields.pop(name, None)
        return _capitalise(template.format(**fields)).replace("….", "…")


class TemplateRationalizer(BatchRationalizer):
    """Deterministic traces from phrase banks; also the fallback of the model and llm backends."""

    name = "template"

    def __init__(self, *, seed: int = 0, batch_size: int = 256, max_overlap: float = DEFAULT_MAX_OVERLAP,
                 keep_existing: bool = True, persona_rate: float = 0.35, withheld_rate: float = 0.3) -> None:
        super().__init__(batch_size=batch_size, max_overlap=max_overlap, keep_existing=keep_existing)
        self.seed = seed
        self.persona_rate = persona_rate
        self.withheld_rate = withheld_rate

    def write(self, contexts: Sequence[TurnContext]) -> list[str | None]:
        return [self.trace(ctx) for ctx in contexts]

    def trace(self, ctx: TurnContext) -> str:
        """The trace for one turn; retried with fresh choices if a draw happens to echo the message."""
        for attempt in range(ATTEMPTS):
            rng = _rng(self.seed, ctx.conversation_id, ctx.turn_index, attempt)
            text = self._compose(ctx, rng, quote=True)
            if repetition_problem(text, ctx.message, self.max_overlap) is None:
                return text
        # Quotes of the agent or the goal can overlap a message that copies them; drop all quotes.
        for attempt in range(ATTEMPTS):
            text = self._compose(ctx, _rng(self.seed, ctx.conversation_id, ctx.turn_index, -1 - attempt),
                                 quote=False)
            if repetition_problem(text, ctx.message, self.max_overlap) is None:
                return text
        raise ValueError(f"template: conversation {ctx.conversation_id!r} turn {ctx.turn_index}: every draw "
                         f"repeats the message {ctx.message[:80]!r}")

    # --- composition -------------------------------------------------------------------------

    def _compose(self, ctx: TurnContext, rng: random.Random, quote: bool) -> str:
        picker = Picker(rng, self._fields(ctx) if quote else {})
        parts: list[str | None] = [self._situation(ctx, picker)]
        patterns = list(ctx.patterns)
        if len(patterns) > MAX_PATTERN_SENTENCES:
            patterns = rng.sample(patterns, MAX_PATTERN_SENTENCES)
        for name in patterns:
            parts.append(self._pattern(name, ctx, picker))
        shape = None if ctx.patterns else self._shape(ctx)
        if shape:
            parts.append(picker.pick(phrases.SHAPE[shape]))
        goal_sentence = self._goal(ctx, picker, rng, quote)
        if not patterns and not shape and not goal_sentence and not ctx.leaving and not ctx.action and (
            ctx.agent_question is None or rng.random() < 0.3
        ):
            parts.append(picker.pick(phrases.PLAIN))
        if goal_sentence:
            # The goal sometimes comes first: people lead with what they want as often as with context.
            if rng.random() < 0.25:
                parts.insert(0, goal_sentence)
            else:
                parts.append(goal_sentence)
        if ctx.persona and rng.random() < self.persona_rate:
            parts.append(self._persona(ctx.persona, picker, rng))
        said = [p for p in parts if p] or [picker.pick(phrases.PLAIN) or phrases.PLAIN[0]]
        return " ".join([said[0], *(_connect(s, rng) for s in said[1:])])

    def _fields(self, ctx: TurnContext) -> dict[str, str | None]:
        said = None
        if ctx.last_agent:
            agent_sentences = sentences(ctx.last_agent)
            said = shorten(agent_sentences[-1], 10) if agent_sentences else None
        question = ctx.agent_question
        return {
            "q": shorten(question) if question else None,
            "said": said if said != (shorten(question, 10) if question else None) else None,
            "action": action_phrase(ctx.action) if ctx.action else None,
            "withheld": self._withheld_label(ctx),
            "item": self._item(ctx),
        }

    def _situation(self, ctx: TurnContext, picker: Picker) -> str | None:
        if ctx.action:
            return picker.pick(phrases.SITUATIONS["action"]) or picker.pick(phrases.SITUATIONS["leaving"])
        if ctx.leaving and ctx.is_last_user_turn:
            return picker.pick(phrases.SITUATIONS["leaving"])
        if ctx.last_agent is None:
            return picker.pick(phrases.SITUATIONS["opening" if ctx.user_turn_number == 0 else "continue"])
        if ctx.agent_question:
            patterns = set(ctx.patterns)
            if patterns & {"withholding_info", "privacy_concern"}:
                # Their sentence may quote the question itself; half the time the situation does.
                heard = picker.rng.random() < 0.5
                return picker.pick(phrases.SITUATIONS["heard_question"]) if heard else None
            if patterns & set(_QUOTE_PATTERNS):
                return picker.pick(phrases.SITUATIONS["heard_question"])
            return picker.pick(phrases.SITUATIONS["answer"])
        if ctx.agent_offered:
            return picker.pick(phrases.SITUATIONS["offer"])
        if ctx.user_turn_number == 0:
            return picker.pick(phrases.SITUATIONS["reply_opening"])
        return picker.pick(phrases.SITUATIONS["react"]) or picker.pick(phrases.SITUATIONS["offer"])

    @staticmethod
    def _shape(ctx: TurnContext) -> str | None:
        if ctx.action or ctx.leaving:
            return None
        if last_question(ctx.message):
            return "ask_back"
        if len(ctx.message.split()) <= 3:
            return "short"
        return None

    def _pattern(self, name: str, ctx: TurnContext, picker: Picker) -> str | None:
        if name == "emotional_expression":
            return picker.pick(phrases.EMOTIONS[emotion_of(ctx.message)])
        bank = phrases.PATTERNS.get(name)
        return picker.pick(bank) if bank else None

    def _goal(self, ctx: TurnContext, picker: Picker, rng: random.Random, quote: bool) -> str | None:
        goal = ctx.goal
        if goal is None:
            return None
        reasons = goal_reasons(goal)
        relevant = [r for r in reasons if self._reason_touched(r, ctx.message)]
        bargaining = bool({"negotiation", "refusal", "implicit_preference", "pushback"} & set(ctx.patterns))
        if relevant:
            # A message that names several items (a deal) is mostly about the one that matters most.
            ranked = sorted(relevant, key=lambda r: _RANK_ORDER.get(r.key.lower(), 1))
            reason = ranked[0] if rng.random() < 0.6 else rng.choice(relevant)
            extra = {"reason": _clause(reason.text)}
            if reason.item:
                extra["item"] = reason.item.lower()
            return picker.pick(phrases.GOAL[_reason_bank(reason)], extra)
        if reasons and bargaining and rng.random() < 0.6:
            return picker.pick(phrases.GOAL["reason"], {"reason": _clause(rng.choice(reasons).text)})
        facts = plain_slots(goal)
        mentioned = [n for n, v in facts.items() if slot_touched(ctx.message, n, v)]
        private_mentioned = [n for n in mentioned if n in goal.private]
        if private_mentioned:
            slot = slot_phrase(rng.choice(private_mentioned))
            return picker.pick(phrases.GOAL["private_slip"], {"slot": slot})
        if "withheld" in picker.fields and (
            set(ctx.patterns) & {"withholding_info", "privacy_concern"} or rng.random() < self.withheld_rate
        ):
            return picker.pick(phrases.GOAL["withheld"])
        values = [_value_text(facts[n], ctx.message) for n in mentioned]
        values = [v for v in values if v]
        if values:
            return picker.pick(phrases.GOAL["value"], {"value": rng.choice(values)})
        if quote and goal.text.strip() and (ctx.user_turn_number == 0 or rng.random() < 0.2):
            first = sentences(goal.text)[0] if sentences(goal.text) else goal.text
            if first.endswith("?"):  # a conversation prompt (chitchat): quoted as given
                return picker.pick(phrases.GOAL["prompt"], {"goal": shorten(first, 20)})
            return picker.pick(phrases.GOAL["goal"], {"goal": first_person(shorten(first, 20))})
        return None

    @staticmethod
    def _reason_touched(reason: Reason, message: str) -> bool:
        return any(mentions(message, word) for word in (reason.item, reason.key) if word and len(word) > 2)

    @staticmethod
    def _item(ctx: TurnContext) -> str | None:
        """A goal item the message is about: an item a reason is attached to, or a short slot value."""
        for reason in goal_reasons(ctx.goal):
            if reason.item and mentions(ctx.message, reason.item):
                return reason.item.lower()
        for name, value in plain_slots(ctx.goal).items():
            text = _value_text(value, ctx.message)
            if text and name not in (ctx.goal.private if ctx.goal else ()):
                return text
        return None

    @staticmethod
    def _withheld_label(ctx: TurnContext) -> str | None:
        """A private slot the user has not disclosed so far, preferring one the agent asks about."""
        goal = ctx.goal
        if goal is None or not goal.private:
            return None
        said_so_far = " ".join((*ctx.earlier_user_messages, ctx.message))
        hidden = [n for n in goal.private
                  if not is_reason_slot(n) and not slot_touched(said_so_far, n, goal.slots.get(n))]
        if not hidden:
            return None
        question = ctx.agent_question or ""
        asked = [n for n in hidden
                 if any(mentions(question, w) for w in slot_phrase(n).split() if len(w) > 3)]
        return slot_phrase(asked[0] if asked else hidden[0])

    def _persona(self, persona: Mapping[str, Any], picker: Picker, rng: random.Random) -> str | None:
        # Persona facts may sit one level down (e.g. CaSiNo's `personality.svo`).
        facts: dict[str, Any] = dict(persona)
        for value in persona.values():
            if isinstance(value, Mapping):
                facts = {**value, **facts}
        svo = str(facts.get("svo", "")).lower()
        if svo in ("prosocial", "proself"):
            return picker.pick(phrases.PERSONA[svo])
        big_five = facts.get("big-five") or facts.get("big_five") or {}
        if isinstance(big_five, Mapping) and isinstance(big_five.get("agreeableness"), int | float):
            score = float(big_five["agreeableness"])
            if score >= 5.5:
                return picker.pick(phrases.PERSONA["agreeable"])
            if score <= 3.0:
                return picker.pick(phrases.PERSONA["blunt"])
        for key in ("style", "traits", "trait", "personality", "mood"):
            value = facts.get(key)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                value = rng.choice(value)
            if isinstance(value, str) and 0 < len(value.split()) <= 6:
                return picker.pick(phrases.PERSONA["trait"], {"trait": value.strip().rstrip(".").lower()})
        return None

def _connect(sentence: str, rng: random.Random) -> str:
    """Now and then, join a sentence to the one before with a connective, as people think in a run."""
    if rng.random() >= CONNECTIVE_RATE or sentence.startswith('"'):
        return sentence
    first = sentence.split(" ", 1)[0].strip(",;:")
    if first != "I" and not first.startswith("I'") and first.lower() not in _LOWER_OK:
        return sentence
    rest = sentence if first == "I" or first.startswith("I'") else sentence[0].lower() + sentence[1:]
    return f"{rng.choice(_CONNECTIVES)} {rest}"


def _reason_bank(reason: Reason) -> str:
    """Which phrase bank fits a reason: by the rank it is filed under (CaSiNo: high/medium/low)."""
    if not reason.item:
        return "reason"
    rank = reason.key.lower()
    if rank in ("high", "top", "first", "1"):
        return "reason_high"
    if rank in ("medium", "second", "2"):
        return "reason_medium"
    if rank in ("low", "third", "last", "3"):
        return "reason_low"
    return "reason_item"


def action_phrase(action: str) -> str:
    """A structured action as a gerund phrase: `submit_deal` -> `putting the deal in writing`."""
    key = re.sub(r"[\s\-]+", "_", action.strip().lower())
    return _ACTIONS.get(key, "going with " + key.replace("_", " "))


def _value_text(value: Any, message: str) -> str | None:
    """The slot value as the message mentions it, when it is short enough to quote."""
    if isinstance(value, Mapping):
        candidates = list(value.values())
    elif isinstance(value, list):
        candidates = list(value)
    else:
        candidates = [value]
    for candidate in candidates:
        text = str(candidate)
        if isinstance(candidate, bool) or not isinstance(candidate, str | int | float):
            continue
        if len(text.split()) <= 5 and mentions(message, text):
            return text.lower() if isinstance(candidate, str) else text
    return None
