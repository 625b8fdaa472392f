"""Scripted users: an agenda per domain (`UserPolicy`) played with behaviour knobs (`Knobs`).

A domain's policy decides *what* the user says (which facts, how it reacts to a proposal);
this module decides *how*: disclosure pace, privacy, withholding, intent changes, patience,
fragments and emotion. Each reply names the behaviour patterns it showed and carries a
first-person private reasoning, like a trained simulator's `<think>` block.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.data.schema import PATTERN_NAMES
from mimesis_rl.envs.actions import parse_message
from mimesis_rl.envs.protocols import ActionSpec, ParsedMessage, SessionSpec, UserReply
from mimesis_rl.envs.scripted.knobs import Knobs

EXPLAIN_RE = re.compile(
    r"\b(because|so that|so i can|so we can|to make sure|helps? me|in order to|"
    r"that way|need(?:s)? it to|only use)\b",
    re.IGNORECASE,
)


@dataclass
class Say:
    """One reply under construction: message parts, private thoughts, patterns shown."""

    parts: list[str] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    ended: bool = False
    mood: str = "neutral"  # "neg" | "pos" | "neutral": colours emotional expression

    def say(self, text: str, *patterns: str) -> Say:
        if text:
            self.parts.append(text)
        for name in patterns:
            self.show(name)
        return self

    def think(self, text: str) -> Say:
        self.thoughts.append(text)
        return self

    def show(self, pattern: str) -> None:
        if pattern not in PATTERN_NAMES:
            raise ValueError(f"unknown behaviour pattern {pattern!r}")
        if pattern not in self.patterns:
            self.patterns.append(pattern)

    def accept(self, text: str, thought: str) -> Say:
        self.meta["accept"] = True
        self.ended = True
        self.mood = "pos"
        return self.say(text).think(thought)

    def reject(self, text: str, thought: str, *patterns: str) -> Say:
        self.meta["accept"] = False
        self.mood = "neg"
        return self.say(text, "refusal", *patterns).think(thought)


@dataclass
class UserSession:
    """One scripted user's private state in one dialogue."""

    spec: SessionSpec
    knobs: Knobs
    rng: random.Random
    slots: dict[str, Any]
    turn: int = 0
    told: set[str] = field(default_factory=set)
    declined: Counter = field(default_factory=Counter)
    memory: dict[str, Any] = field(default_factory=dict)
    change_at: int | None = None
    changed: bool = False
    ended: bool = False

    @property
    def private(self) -> list[str]:
        return list(self.spec.goal.private)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p


class UserPolicy:
    """A domain's agenda. Subclasses define the facts and how to react to the agent.

    Facts are the goal slots the user can put in words: `fact_slots` in the order a person
    would mention them, `fact_text` renders one, `ask_patterns` says which words in the agent's
    message count as asking for it.
    """

    domain: str = ""
    actions: tuple[ActionSpec, ...] = ()
    fact_slots: tuple[str, ...] = ()
    ask_patterns: dict[str, str] = {}
    slot_labels: dict[str, str] = {}

    # -- what a domain supplies -------------------------------------------------------------

    def setup(self, s: UserSession) -> None:
        """Domain memory for a new session (optional)."""

    def fact_text(self, s: UserSession, slot: str) -> str:
        raise NotImplementedError

    def vague_opening(self, s: UserSession) -> str:
        raise NotImplementedError

    def on_action(self, s: UserSession, say: Say, parsed: ParsedMessage, message: str) -> None:
        """React to a proposal (kind `propose`) the agent made."""
        say.say("Hmm, okay.").think("The agent did something I did not expect.")

    def on_talk(self, s: UserSession, say: Say, message: str) -> None:
        """React to plain talk that asked for none of the facts."""
        self.answer_generic(s, say)

    def changeable(self, s: UserSession) -> bool:
        return bool(s.slots.get("changeable"))

    def change_intent(self, s: UserSession, say: Say) -> None:
        """Switch one changeable slot to an alternative and tell the environment (goal_update)."""
        changeable: dict[str, list[Any]] = s.slots.get("changeable", {})
        slot = s.rng.choice(sorted(changeable))
        options = [v for v in changeable[slot] if v != s.slots[slot]]
        if not options:
            return
        new = s.rng.choice(options)
        old = s.slots[slot]
        s.slots[slot] = new
        s.told.discard(slot)
        say.meta.setdefault("goal_update", {})[slot] = new
        say.say(self.change_text(s, slot, old, new), "intent_change")
        say.think(f"I've changed my mind: I want {new} rather than {old} for the {self.label(slot)}.")
        if s.memory.get("changes"):
            say.show("goal_ambiguity")
            say.think("I keep going back and forth on this.")
        s.memory["changes"] = s.memory.get("changes", 0) + 1
        s.told.add(slot)
        # Flip-floppers may change again a turn or two later.
        s.changed = not s.chance(s.knobs.intent_change * 0.5)
        if not s.changed:
            s.change_at = s.turn + s.rng.randint(1, 2)

    def change_text(self, s: UserSession, slot: str, old: Any, new: Any) -> str:
        return f"Actually, I changed my mind: {self.fact_text(s, slot)}"

    # -- shared behaviour ---------------------------------------------------------------------

    def asks(self, message: str, slot: str) -> bool:
        pattern = self.ask_patterns.get(slot)
        return bool(pattern and re.search(pattern, message, re.IGNORECASE))

    def label(self, slot: str) -> str:
        """How the user thinks of a fact in their private reasoning ("my budget")."""
        return self.slot_labels.get(slot, slot.replace("_", " "))

    def value_text(self, s: UserSession, slot: str) -> str:
        """The card's value of a fact as the user thinks of it ("$500"), so the private reasoning
        of a decision names the value it compares against (a small model has nothing to compare
        with when the reasoning only says "within what I'm willing to pay")."""
        value = s.slots.get(slot)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return str(value)
        return self.fact_text(s, slot).rstrip(".!? ")

    def asked_about(self, s: UserSession, slot: str) -> str:
        """The grounding clause of a reply to a question: "They asked about my budget ($500)"."""
        return f"They asked about my {self.label(slot)} ({self.value_text(s, slot)})"

    def facts(self, s: UserSession) -> tuple[str, ...]:
        """The facts this user can state (per session, for domains whose goals differ in shape)."""
        return self.fact_slots

    def asked_slots(self, s: UserSession, message: str) -> list[str]:
        return [slot for slot in self.facts(s) if self.asks(message, slot)]

    def untold(self, s: UserSession) -> list[str]:
        return [slot for slot in self.facts(s) if slot not in s.told]

    def tell(self, s: UserSession, say: Say, slot: str, *patterns: str) -> None:
        say.say(self.fact_text(s, slot), *patterns)
        s.told.add(slot)

    def answer(self, s: UserSession, say: Say, slot: str, message: str) -> bool:
        """Answer a direct question about `slot`, subject to privacy and cooperativeness."""
        nice = self.label(slot)
        if slot in s.private and s.declined[slot] < 3:
            p = s.knobs.privacy / (2 if EXPLAIN_RE.search(message) else 1)
            if s.chance(p):
                s.declined[slot] += 1
                say.say(
                    s.rng.choice(
                        [
                            "I'd rather not say.",
                            "Why do you need to know that?",
                            "That's kind of personal.",
                            "Do I have to tell you that?",
                        ]
                    ),
                    "privacy_concern",
                )
                say.think(
                    f"{self.asked_about(s, slot)}; I don't want to share my {nice} with a stranger, "
                    f"so I'll keep it to myself for now."
                )
                return False
        if not s.chance(s.knobs.cooperativeness):
            s.declined[slot] += 1
            say.say(
                s.rng.choice(
                    [
                        "Not sure, does it matter?",
                        "Can we skip that?",
                        "I don't know, you tell me.",
                        "Let's not get into that.",
                    ]
                ),
                "withholding_info",
            )
            say.think(f"{self.asked_about(s, slot)}; I can't be bothered to explain my {nice} right now.")
            return False
        self.tell(s, say, slot)
        say.think(f"{self.asked_about(s, slot)}; that's fair, I'll tell them.")
        return True

    def answer_generic(self, s: UserSession, say: Say) -> None:
        """When nothing was asked: volunteer a fact at the disclosure pace, or nudge the agent."""
        if self.volunteer(s, say):
            return
        if s.knobs.pushback and s.chance(s.knobs.pushback):
            say.say(
                s.rng.choice(
                    ["What do you suggest, then?", "Can you be more specific?", "Why are you asking me that?"]
                ),
                "follow_up_probe",
            )
            say.think("The agent is not getting anywhere; I want it to be concrete.")
            return
        say.say(s.rng.choice(["Okay.", "Sure.", "Alright, what do you have?", "Go on."]))
        say.think("I have nothing to add; let's see what they come up with.")

    def volunteer(self, s: UserSession, say: Say, force: bool = False) -> bool:
        """Mention one more fact nobody asked for (at the disclosure pace)."""
        candidates = [slot for slot in self.untold(s) if slot not in s.private or s.knobs.privacy < 0.5]
        if not candidates or not (force or s.chance(s.knobs.disclosure)):
            return False
        slot = candidates[0]
        self.tell(s, say, slot)
        say.think(f"I should mention my {self.label(slot)} too; it matters to me.")
        return True

    def opening(self, s: UserSession) -> Say:
        say = Say()
        if s.knobs.disclosure >= 0.95:
            say.say(self.vague_opening(s))
            for slot in self.facts(s):
                self.tell(s, say, slot)
            say.think("I'll just tell them everything I need right away so they can sort it out.")
            return say
        say.say(self.vague_opening(s), "vague_request")
        say.think("I'll start with the gist and see what they ask.")
        self.volunteer(s, say)
        return say

    def respond(self, s: UserSession, message: str) -> Say:
        say = Say()
        parsed = parse_message(message, self.actions)
        due = (
            s.change_at is not None and not s.changed and (s.turn >= s.change_at or parsed.action is not None)
        )
        if due and parsed.action is not None:
            self.change_intent(s, say)
            say.meta["accept"] = False
            say.show("refusal")
            say.say("So that one doesn't work for me anymore.")
            return say
        if parsed.action is not None:
            self.on_action(s, say, parsed, message)
            return say
        asked = self.asked_slots(s, message)
        if not asked:
            self.on_talk(s, say, message)
        for slot in asked:
            self.answer(s, say, slot, message)
        if asked and s.knobs.disclosure > 0.5:
            self.volunteer(s, say)
        if due:
            self.change_intent(s, say)
        return say


# -- style -------------------------------------------------------------------------------------

_TERSE_SUBS: Sequence[tuple[str, str]] = (
    (r"^(hi|hello|hey|well|honestly|so|okay|sure)[,!.]?\s+", ""),
    (r"\bI would like\b", "want"),
    (r"\bI'm looking for\b", "need"),
    (r"\bplease\b", "pls"),
    (r"\byou\b", "u"),
    (r"\bthanks\b", "thx"),
    (r"\bbecause\b", "cuz"),
    (r"\bdon't\b", "dont"),
)
_NEG = (
    "Ugh, this is taking forever.",
    "Honestly, I'm getting frustrated.",
    "I'm really stressed about this.",
    "This is so annoying.",
)
_POS = ("Oh, that's wonderful!", "Yay, finally!", "That makes me so happy.")
_WORRY = ("I'm a bit worried about getting this right.", "I'm nervous about this, to be honest.")
_CHATTER = (
    "Sorry, I know I'm rambling.",
    "It's been a long week, anyway.",
    "My friend said you'd be helpful.",
)


def _terse(text: str) -> str:
    out = text.strip()
    for pattern, sub in _TERSE_SUBS:
        out = re.sub(pattern, sub, out, flags=re.IGNORECASE)
    out = out.rstrip(".!")
    return out[:1].lower() + out[1:] if out else out


def finish(s: UserSession, say: Say) -> UserReply:
    """Apply verbosity and emotion to a reply and turn it into a UserReply."""
    parts = [p for p in say.parts if p]
    if s.chance(s.knobs.emotion):
        line = s.rng.choice(
            _POS if say.mood == "pos" else _NEG if say.mood == "neg" or s.turn > 3 else _WORRY
        )
        parts.insert(0, line)
        say.show("emotional_expression")
        say.think("I can't help showing how I feel about this.")
    if s.knobs.verbosity < 0.3:
        parts = [_terse(p) for p in parts]
        say.show("incomplete_utterance")
        message = " ".join(p for p in parts if p)
    else:
        message = " ".join(parts)
        if s.knobs.verbosity > 0.8 and not say.ended and s.chance(0.5):
            message += " " + s.rng.choice(_CHATTER)
    reasoning = " ".join(say.thoughts) or "I'll keep it short."
    meta = dict(say.meta)
    meta["turn"] = s.turn
    return UserReply(
        message=message.strip(), reasoning=reasoning, ended=say.ended, patterns=list(say.patterns), meta=meta
    )


class ScriptedUser:
    """A `UserSide` that plays a domain policy with a set of knobs; pure Python, deterministic."""

    def __init__(self, policy: UserPolicy, knobs: Knobs, name: str) -> None:
        self.policy = policy
        self.knobs = knobs
        self.name = name

    def start(self, specs: list[SessionSpec]) -> list[UserSession]:
        sessions = []
        for spec in specs:
            if spec.domain != self.policy.domain:
                raise ValueError(
                    f"{self.name} plays domain {self.policy.domain!r}, got a {spec.domain!r} session"
                )
            rng = random.Random(f"user:{self.name}:{spec.domain}:{spec.seed}")
            s = UserSession(spec=spec, knobs=self.knobs, rng=rng, slots=dict(spec.goal.slots))
            self.policy.setup(s)
            if self.policy.changeable(s) and s.chance(self.knobs.intent_change):
                s.change_at = rng.randint(1, 3)
            sessions.append(s)
        return sessions

    def opening(self, sessions: list[UserSession]) -> list[UserReply]:
        return [finish(s, self.policy.opening(s)) for s in sessions]

    def respond(self, sessions: list[UserSession], agent_messages: list[str]) -> list[UserReply]:
        return [self._respond_one(s, m) for s, m in zip(sessions, agent_messages, strict=True)]

    def _respond_one(self, s: UserSession, message: str) -> UserReply:
        s.turn += 1
        if s.ended:
            return UserReply(message="", reasoning="I already left.", ended=True, meta={"turn": s.turn})
        if not message or not message.strip():
            say = (
                Say()
                .say("Hello? You didn't say anything.", "follow_up_probe")
                .think("The agent sent nothing; I'm confused.")
            )
        else:
            say = self.policy.respond(s, message)
        if not say.ended and s.turn >= s.knobs.patience and not say.meta.get("accept"):
            say = (
                Say(ended=True, mood="neg")
                .say(
                    s.rng.choice(
                        [
                            "Forget it, I'll look elsewhere.",
                            "I don't have time for this. Bye.",
                            "This isn't going anywhere, I'm leaving.",
                        ]
                    ),
                    "emotional_expression",
                    "refusal",
                )
                .think("I've run out of patience; I'm done with this chat.")
            )
        s.ended = say.ended
        return finish(s, say)


PolicyFactory = Callable[[], UserPolicy]
