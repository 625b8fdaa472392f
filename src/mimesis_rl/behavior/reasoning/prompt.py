"""The prompt that asks a model (local base model or remote LLM) for one user turn's private reasoning.

Both model backends show the same context the template backend uses: domain, goal card (with the
private slots marked), reasons the corpus wrote, persona, the patterns on the turn and the last
agent turn, then the message, and ask for the reasoning behind it without repeating it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mimesis_rl.behavior.reasoning.context import TurnContext, goal_reasons, is_reason_slot

# Short glosses from DESIGN.md's table; the prompt only needs a hint of what each name means.
PATTERN_GLOSS: dict[str, str] = {
    "vague_request": "asks for something underspecified",
    "implicit_preference": "signals a preference without stating it",
    "withholding_info": "leaves a direct question unanswered or deflects it",
    "privacy_concern": "declines to share personal details, or asks why they are needed",
    "refusal": "rejects a proposal, offer or suggestion",
    "criticism": "judges the other side's answer negatively",
    "pushback": "contests a claim or argues for their own position",
    "intent_change": "switches or revises the goal",
    "goal_ambiguity": "is undecided or holds conflicting goals",
    "emotional_expression": "shows frustration, impatience, worry or delight",
    "incomplete_utterance": "writes fragments, typos, one-word or cut-off replies",
    "negotiation": "haggles, bargains, compares offers or prices",
    "follow_up_probe": "asks the other side to clarify, justify or go deeper",
}

SYSTEM = (
    "You write the private thoughts of a person (the user) in a conversation. Given the context, write one "
    "to three short sentences in the first person (\"I ...\") that explain why the user writes this message "
    "at this moment: what they want, what they react to, what they hold back. Never repeat or paraphrase "
    "the message itself. Answer with the thoughts only.\n"
    "Example. The other side just said: \"The suite is 300 euros a night.\" The user's message: "
    "\"Do you have anything else?\" Thoughts: I can't spend that much, but I don't want to tell them my "
    "budget yet, so I ask what else there is."
)
MAX_FIELD_CHARS = 400


def _clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def context_lines(ctx: TurnContext) -> list[str]:
    """The turn's context as short labelled lines."""
    lines = [f"Domain: {ctx.domain}"]
    if ctx.goal is not None:
        lines.append(f"The user's goal: {_clip(ctx.goal.text)}")
        facts = [f"{name}={_clip(_compact(value), 80)}" + (" (private)" if name in ctx.goal.private else "")
                 for name, value in ctx.goal.slots.items() if not is_reason_slot(name)]
        if facts:
            lines.append("Facts the user knows: " + "; ".join(facts))
        reasons = [f"{r.item or r.key or 'reason'}: {_clip(r.text, 200)}" for r in goal_reasons(ctx.goal)]
        if reasons:
            lines.append("Reasons the user gave: " + "; ".join(reasons))
    if ctx.persona:
        persona = {k: v for k, v in ctx.persona.items() if isinstance(v, str | int | float | Mapping)}
        if persona:
            lines.append(f"Persona: {_clip(_compact(persona), 300)}")
    if ctx.patterns:
        lines.append("Behaviour in this message: " + "; ".join(
            f"{name} ({PATTERN_GLOSS.get(name, name)})" for name in ctx.patterns))
    if ctx.last_agent is None:
        lines.append("The other side has said nothing since the user's last message." if ctx.user_turn_number
                     else "Nothing has been said yet; this message opens the conversation.")
    else:
        lines.append(f"The other side just said: \"{_clip(ctx.last_agent)}\"")
    lines.append(f"The user's message: \"{_clip(ctx.message)}\"")
    return lines


def messages_for(ctx: TurnContext) -> list[dict[str, str]]:
    """Chat messages (system + user) asking for the reasoning behind this turn."""
    body = "\n".join(context_lines(ctx)) + "\n\nWrite the user's private reasoning for this message."
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]


def plain_prompt(ctx: TurnContext) -> str:
    """The same request as one text, for a model without a chat template."""
    return SYSTEM + "\n\n" + "\n".join(context_lines(ctx)) + "\nThe user's private reasoning:"
