"""The `template` coach: deterministic notes from patterns, reasoning cues, private slots and endings.

It reads the following user turns' behaviour patterns (labelled, or read from the reasoning by a small
cue lexicon), the private slots (by label, never by value), numeric hints (direction only: "they will
not pay that much") and how the dialogue ended. The prompted backends fall back to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from mimesis_rl.agent.coach.base import MAX_NOTE_WORDS, clean_note
from mimesis_rl.agent.coach.context import CoachContext
from mimesis_rl.agent.coach.leaks import leaks
from mimesis_rl.data.schema import GoalCard

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
