"""What the user's card says: the system message a model user is given before the dialogue.

Two styles, for two kinds of user: `system_card`, the trained simulator's (persona, goal with its
private slots, how to act the behaviour patterns, the `<think>` format), and `prompted_card`, the
assistant baseline's plain role-play prompt (no reasoning format). Which one a user gets is the
runtime's rule (`UserSimulator.card`); SFT data renders corpus conversations under the same
`system_card` (`conversation_card`), so training and inference read the same card.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from mimesis_rl.data.schema import PATTERN_NAMES, Conversation, GoalCard
from mimesis_rl.simulator.format import END_MARKER, THINK_CLOSE, THINK_OPEN

# How to *act* each pattern (instructions to the simulator, not labelling definitions).
BEHAVIOUR_GUIDANCE: dict[str, str] = {
    "vague_request": "start underspecified, let the details come out only when asked",
    "implicit_preference": "hint at what you like instead of stating it outright",
    "withholding_info": "sometimes leave a question unanswered or deflect it",
    "privacy_concern": "be reluctant to share personal details and ask why they are needed",
    "refusal": "turn down suggestions that do not fit you",
    "criticism": "say so when an answer is unhelpful or wrong",
    "pushback": "argue for your own view when you disagree",
    "intent_change": "you may change or revise what you want along the way",
    "goal_ambiguity": "you are not fully sure what you want and may waver",
    "emotional_expression": "show your feelings: impatience, worry, delight",
    "incomplete_utterance": "write short, casual messages, fragments and typos are fine",
    "negotiation": "haggle, bargain and compare offers",
    "follow_up_probe": "ask follow-up questions and ask the other side to explain",
}


PROPOSAL = "proposal"  # `meta["decision"]` of a reply to a proposal (`decision_windows` marks it)


def behaviour_profile(conversation: Conversation, limit: int = 4) -> list[str]:
    """The conversation's user patterns, most frequent first: the behaviour the card asks for.

    A reply to a proposal (environment dialogues mark it `meta["decision"]`) does not count: whether
    it turns the offer down follows from the card, so its refusal and criticism named in the card
    would hand the model the decision it is trained to make. They did: on held-out decision items
    the card said "turn down suggestions" exactly when the card user declined (43 of 43), and the
    drilled simulator's act was right on all of those and at chance on the rest (issue 27)."""
    counts = Counter(p for t in conversation.user_turns if t.meta.get("decision") != PROPOSAL
                     for p in t.patterns)
    order = {name: i for i, name in enumerate(PATTERN_NAMES)}
    return sorted(counts, key=lambda p: (-counts[p], order[p]))[:limit]


def _format_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_format_value(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_format_value(v) for v in value)
    return str(value)


def card_facts(domain: str, goal: GoalCard) -> dict[str, Any]:
    """The goal's slots as the card states them: a built-in domain's own rendering
    (`TaskEnv.card_facts`), any other domain's (the corpus cards) as they are."""
    from mimesis_rl.envs.registry import DOMAINS

    known = DOMAINS.get(domain)
    return known.env_cls.card_facts(goal.slots) if known is not None else dict(goal.slots)


def system_card(domain: str, goal: GoalCard | None = None, persona: Mapping[str, Any] | None = None,
                behaviours: Sequence[str] = ()) -> str:
    """The simulator's instructions: who it is, what it wants, what it keeps private, how it acts."""
    lines = [f"You are a real person (the user) in a conversation about {domain}. "
             "Stay in character: you are the user, never the assistant. Do not offer help; you are the one "
             "who wants something."]
    if persona:
        lines.append("Persona: " + "; ".join(f"{k}: {_format_value(v)}" for k, v in persona.items()))
    if goal is not None:
        lines.append(f"Your goal: {goal.text}")
        facts = card_facts(domain, goal)
        shared = {k: v for k, v in facts.items() if k not in goal.private}
        private = {k: v for k, v in facts.items() if k in goal.private}
        if shared:
            lines.append("What you know: " + "; ".join(f"{k}: {_format_value(v)}" for k, v in shared.items()))
        if private:
            lines.append("Private (rather not say; reveal only if pressed, one at a time): "
                         + "; ".join(f"{k}: {_format_value(v)}" for k, v in private.items()))
    unknown = [b for b in behaviours if b not in BEHAVIOUR_GUIDANCE]
    if unknown:
        raise ValueError(f"unknown behaviour patterns {unknown}; known: {', '.join(PATTERN_NAMES)}")
    if behaviours:
        lines.append("How you behave: " + "; ".join(BEHAVIOUR_GUIDANCE[b] for b in behaviours) + ".")
    lines.append(f"First think privately inside {THINK_OPEN}{THINK_CLOSE}, then write only your message. "
                 f"When you want to leave, end your message with {END_MARKER}.")
    return "\n".join(lines)


def prompted_card(domain: str, goal: Any = None, persona: Mapping[str, Any] | None = None,
                  behaviours: Sequence[str] = ()) -> str:
    """The assistant baseline's instructions: a plain role-play prompt, no reasoning format."""
    lines = [f"You are role-playing a user who talks to an AI assistant about {domain}. "
             "Write only the user's next message."]
    if persona:
        lines.append("The user: " + "; ".join(f"{k}: {v}" for k, v in persona.items()))
    if goal is not None:
        lines.append(f"The user's goal: {goal.text}")
        if goal.slots:
            lines.append("Facts the user knows: " + "; ".join(
                f"{k}: {_format_value(v)}" for k, v in card_facts(domain, goal).items()))
    lines.append(f"When the user is done, end the message with {END_MARKER}.")
    return "\n".join(lines)


_CARD_DOMAIN = re.compile(
    r"(?:a conversation|an AI assistant) about (.+?)\. (?:Stay in character|Write only)")


def card_domain(card: str) -> str | None:
    """The domain a card (`system_card` or the prompted baseline's) names, None for any other text."""
    match = _CARD_DOMAIN.search(card)
    return match.group(1) if match else None


def conversation_card(conversation: Conversation, max_behaviours: int = 4) -> str:
    """A corpus conversation's card, its own most frequent patterns as the behaviour: what SFT trains
    under and the fidelity evaluation prompts with."""
    return system_card(conversation.domain, conversation.goal, conversation.persona,
                       behaviour_profile(conversation, max_behaviours))
