"""What the prompted coaches (`model`, `llm`) share: the prompt, and the template as their fallback.

Both backends see the same facts the template reads; a note that comes back empty or too short is
replaced by the template's note for that turn (counted in `fallbacks`).
"""

from __future__ import annotations

from collections.abc import Sequence

from mimesis_rl.agent.coach.base import clean_note
from mimesis_rl.agent.coach.context import CoachContext
from mimesis_rl.agent.coach.template import TemplateCoach

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


class TemplateFallback:
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
