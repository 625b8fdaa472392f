"""What a reasoning writer knows about one user turn: the message, the last agent turn, the goal card.

Every backend starts from a `TurnContext`. The cue detectors here (is the agent asking something,
offering something, is the user leaving, which goal slots does the message touch, which reasons
does the corpus already give) are shared by the template writer and the prompts of the model
backends, so both see the same picture of the turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.data.schema import Conversation, GoalCard, Turn

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_QUESTION_START = re.compile(
    r"^(what|where|when|why|how|which|who|whom|whose|do|does|did|are|is|was|were|can|could|would|will|"
    r"shall|should|have|has|may|might)\b",
    re.IGNORECASE,
)
# "How about you?" asks back and "What would you like?" asks; neither offers anything.
_OFFER = re.compile(
    r"\b((how|what) about(?! you\b)|i can (give|offer|do|let)|i could (give|offer|do|let)|"
    r"(?<!what )(?<!which )would you (like|take|accept|prefer|be ok)|i (suggest|recommend|propose)|"
    r"i'?ll give|i will give|you (can|could) (have|take|get)|"
    r"let me (give|offer)|(a|the|this|that|my|your) deal|offer|here'?s (a|an|my)|we could|alternatively)\b",
    re.IGNORECASE,
)
_LEAVING = re.compile(
    r"\b(bye|goodbye|good bye|see you|see ya|take care|have a (good|great|nice)|gotta go|got to go|"
    r"that'?s all|talk (to you )?later|ttyl|good ?night|thanks? (you )?(so much )?for|it was (nice|great))\b",
    re.IGNORECASE,
)
_ACTION_KEYS = ("action", "deal", "act")


@dataclass(frozen=True)
class Reason:
    """A reason the corpus itself gives for part of the goal (e.g. CaSiNo's written reasons)."""

    key: str  # what it is attached to: an item ("firewood") or a rank ("high")
    item: str | None  # the goal item it justifies, when it can be resolved
    text: str  # as the person wrote it


@dataclass(frozen=True)
class TurnContext:
    """One user turn in context; `turn_index` counts all turns of the conversation from 0."""

    conversation_id: str
    turn_index: int
    user_turn_number: int
    message: str
    patterns: tuple[str, ...]
    domain: str
    source: str
    last_agent: str | None
    goal: GoalCard | None
    persona: Mapping[str, Any] | None
    is_last_user_turn: bool
    earlier_user_messages: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return (self.conversation_id, self.turn_index)

    @property
    def agent_question(self) -> str | None:
        """The agent's last question, unless it is an offer ("How about 2 for you?")."""
        question = last_question(self.last_agent)
        return None if question is None or _OFFER.search(question) else question

    @property
    def agent_offered(self) -> bool:
        return bool(self.last_agent and _OFFER.search(self.last_agent))

    @property
    def leaving(self) -> bool:
        return bool(_LEAVING.search(self.message))

    @property
    def action(self) -> str | None:
        """A structured action on the turn (e.g. a CaSiNo deal), named by its type."""
        for key in _ACTION_KEYS:
            value = self.meta.get(key)
            if isinstance(value, Mapping):
                return str(value.get("type") or value.get("name") or key)
            if isinstance(value, str) and value:
                return value
        return None


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


_LEAD_IN = re.compile(
    r"^(?:(?:sure|ok|okay|great|thanks|well|so|alright|hi|hello|hey|oh|yes|no|right)\b[,!.]?\s+)+",
    re.IGNORECASE,
)


def last_question(text: str | None) -> str | None:
    """The last sentence of `text` that asks something (without a lead-in like "Sure,"), or None."""
    if not text:
        return None
    found = [s for s in sentences(text) if s.endswith("?") or _QUESTION_START.match(s)]
    if not found:
        return None
    return _LEAD_IN.sub("", found[-1]) or found[-1]


def shorten(text: str, max_words: int = 12) -> str:
    """A clause-sized excerpt for quoting inside a trace."""
    words = text.strip().rstrip("?.!").split()
    cut = " ".join(words[:max_words])
    return cut + ("…" if len(words) > max_words else "")


def iter_contexts(conversation: Conversation) -> Iterator[TurnContext]:
    """A context for every user turn, in order."""
    users = [i for i, t in enumerate(conversation.turns) if t.role == "user"]
    last_agent: str | None = None
    earlier: list[str] = []
    for index, turn in enumerate(conversation.turns):
        if turn.role != "user":
            last_agent = turn.content
            continue
        yield TurnContext(
            conversation_id=conversation.conversation_id,
            turn_index=index,
            user_turn_number=len(earlier),
            message=turn.content,
            patterns=tuple(turn.patterns),
            domain=conversation.domain,
            source=conversation.source,
            last_agent=last_agent,
            goal=conversation.goal,
            persona=conversation.persona,
            is_last_user_turn=index == users[-1],
            earlier_user_messages=tuple(earlier),
            meta=turn.meta,
        )
        earlier.append(turn.content)
        last_agent = None  # a user turn after a user turn has no fresh agent turn to answer


def with_reasoning(conversation: Conversation, traces: Mapping[int, str]) -> Conversation:
    """A copy of `conversation` whose user turns at the given indices carry the given traces."""
    turns: list[Turn] = [
        turn.model_copy(update={"reasoning": traces[i]}) if i in traces else turn
        for i, turn in enumerate(conversation.turns)
    ]
    return conversation.model_copy(update={"turns": turns})


# --- goal card facts ---------------------------------------------------------------------------


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _slot_label(name: str) -> str:
    return re.sub(r"[_\-]+", " ", name).strip()


def slot_phrase(name: str) -> str:
    """A slot name as words a person would say: `priority_high` -> `high priority`."""
    words = _slot_label(name).split()
    if len(words) == 2 and _is_rank(words[1]):
        words = [words[1], words[0]]
    return " ".join(words)


_SECOND_PERSON = (
    (r"\byou are\b", "I am"), (r"\byou're\b", "I'm"), (r"\byourself\b", "myself"), (r"\byours\b", "mine"),
    (r"\byour\b", "my"), (r"\b(to|for|with|at|about|from|of|than|give|tell|ask|help) you\b", r"\1 me"),
    (r"\byou\b", "I"),
)


def first_person(text: str) -> str:
    """A goal card written to the user ("You want ...") as the user would think it ("I want ...")."""
    for pattern, repl in _SECOND_PERSON:
        text = re.sub(pattern, repl, text, flags=re.IGNORECASE)
    if text[:1].isupper() and not re.match(r"I\b", text):
        text = text[0].lower() + text[1:]
    return text


def is_reason_slot(name: str) -> bool:
    return "reason" in name.lower() or "why" in _words(_slot_label(name))


def _value_strings(value: Any) -> list[str]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, str | int | float):
        return [str(value)]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _value_strings(v)]
    if isinstance(value, Sequence):
        return [s for v in value for s in _value_strings(v)]
    return []


def mentions(text: str, phrase: str) -> bool:
    """Whole-word, case-insensitive occurrence of `phrase` in `text` (plural -s allowed)."""
    phrase = phrase.strip()
    if not phrase:
        return False
    return re.search(rf"(?<![a-z0-9]){re.escape(phrase.lower())}s?(?![a-z0-9])", text.lower()) is not None


def slot_touched(text: str, name: str, value: Any) -> bool:
    """Does `text` mention the slot's value, or (for a word-sized name) the slot's name?"""
    if any(mentions(text, v) for v in _value_strings(value) if len(v) >= 2):
        return True
    label = _slot_label(name)
    return bool(label) and len(label.split()) <= 3 and mentions(text, label)


def plain_slots(goal: GoalCard | None) -> dict[str, Any]:
    """Slots that state facts, without the reason slots."""
    if goal is None:
        return {}
    return {k: v for k, v in goal.slots.items() if not is_reason_slot(k)}


def _suffix(name: str) -> str:
    parts = [p for p in re.split(r"[_\-\s]+", name.lower()) if p and p not in ("reason", "reasons", "why")]
    return parts[-1] if parts else ""


def _resolve_item(key: str, slots: Mapping[str, Any]) -> str | None:
    """Which goal item a reason keyed `key` justifies: `key` itself, or the value filed under it."""
    key_l = key.lower()
    for name, value in slots.items():
        if isinstance(value, Mapping):
            for k, v in value.items():
                if str(k).lower() == key_l and isinstance(v, str):
                    return v
                if isinstance(v, str) and v.lower() == key_l:
                    return str(k) if not _is_rank(str(k)) else v
        elif isinstance(value, str) and key_l in _words(_slot_label(name)):
            return key if _is_rank(value) else value
    return None if _is_rank(key) else key


def _is_rank(word: str) -> bool:
    return word.lower() in {"high", "medium", "low", "top", "first", "second", "third", "1", "2", "3"}


def goal_reasons(goal: GoalCard | None) -> list[Reason]:
    """Reasons the corpus wrote down, from any slot whose name says `reason`.

    Handles a string slot (`reason_firewood: "..."`, attached by the name's last word), a mapping
    (`reasons: {High: "..."}` / `{Firewood: "..."}`) and a list of strings. Rank keys such as
    `High` are resolved to the item ranked there when another slot says which one it is.
    """
    if goal is None:
        return []
    facts = plain_slots(goal)
    out: list[Reason] = []
    for name, value in goal.slots.items():
        if not is_reason_slot(name):
            continue
        if isinstance(value, str):
            pairs = [(_suffix(name), value)]
        elif isinstance(value, Mapping):
            pairs = [(str(k), v) for k, v in value.items() if isinstance(v, str)]
        elif isinstance(value, Sequence):
            pairs = [("", v) for v in value if isinstance(v, str)]
        else:
            pairs = []
        for key, text in pairs:
            if text.strip():
                item = _resolve_item(key, facts) if key else None
                out.append(Reason(key=key, item=item, text=text.strip()))
    return out
