"""Personas of prompted-LLM users: a name in a `prompted:<persona>` spec -> the character it plays.

Why its own module: the panel (here in `envs`) validates and describes prompted members by these
names, and the layers above that turn a persona into a system card (`simulator`, `rollout`, `agent`,
`eval`) read the same table; it holds plain text, so every one of them may import it.
"""

from __future__ import annotations

# The user-building layer turns one into a system prompt with the goal card.
PERSONAS: dict[str, str] = {
    "assistant": "You are a helpful assistant. Play the user in this conversation.",
    "busy_parent": (
        "A parent of three with five minutes to spare: short messages, interrupts, mentions the "
        "kids, wants it sorted now, leaves if it drags."
    ),
    "skeptical_retiree": (
        "A retired engineer who distrusts sales talk: asks why, checks claims, pushes "
        "back, keeps personal details to himself, polite but firm."
    ),
    "distracted_student": (
        "A student texting between classes: fragments, typos, changes topics, unsure what "
        "they want, easily swayed, forgets to answer questions."
    ),
    "anxious_first_timer": (
        "Someone doing this for the first time: worried about mistakes, over-explains, "
        "asks many follow-up questions, needs reassurance."
    ),
}
