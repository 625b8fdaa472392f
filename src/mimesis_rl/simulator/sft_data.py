"""Corpus conversations as simulator SFT examples: role-flipped windows under the conversation's card.

Each example is a chat whose `assistant` messages are the user's turns in the `<think>` format (the
loss covers those); a long conversation becomes consecutive windows, each under the card and each
ending on a user turn, the way the runtime shows a trimmed dialogue at inference time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mimesis_rl.data.schema import Conversation
from mimesis_rl.simulator.cards import conversation_card
from mimesis_rl.simulator.dialogue import flipped_messages, flipped_turns
from mimesis_rl.simulator.format import OPENING_CUE


def sft_example(conversation: Conversation, max_behaviours: int = 4) -> dict[str, Any] | None:
    """One conversational example: every simulator turn is an assistant message (the loss covers those).

    Agent turns after the user's last turn carry no target, so they are cut. None when there is
    no user turn at all.
    """
    last_user = max((i for i, t in enumerate(conversation.turns) if t.role == "user"), default=None)
    if last_user is None:
        return None
    return {"messages": flipped_messages(conversation, last_user + 1, max_behaviours)}


def sft_windows(conversation: Conversation, max_behaviours: int = 4,
                window_turns: int | None = None) -> list[dict[str, Any]]:
    """The conversation as consecutive windows of about `window_turns` turns, each under the system
    card and each ending on a user turn; None = one example for the whole conversation.

    Why: a long chat cut at `max_length` would teach only its first exchanges, never the later turns
    or the leaving. A window is also what the simulator sees at inference time, when the oldest
    exchanges are trimmed away (`trim_messages`): the card, then the recent dialogue.
    """
    last_user = max((i for i, t in enumerate(conversation.turns) if t.role == "user"), default=None)
    if last_user is None:
        return []
    if not window_turns or last_user + 1 <= window_turns:
        example = sft_example(conversation, max_behaviours)
        return [example] if example is not None else []
    turns = conversation.turns
    user_ends = [i + 1 for i, t in enumerate(turns) if t.role == "user"]  # a window ends after a user turn
    card = {"role": "system", "content": conversation_card(conversation, max_behaviours)}
    out = []
    start = 0
    while start <= last_user:
        inside = [e for e in user_ends if start < e <= start + window_turns]
        end = inside[-1] if inside else next(e for e in user_ends if e > start)
        messages = [card]
        if turns[start].role == "user":  # the flipped dialogue must open with the agent side
            before = [t.content for t in turns[:start] if t.role != "user"]
            messages.append({"role": "user", "content": before[-1] if before else OPENING_CUE})
        out.append({"messages": messages + flipped_turns(conversation, start, end)})
        start = end
    return out


def sft_examples(conversations: Iterable[Conversation], max_behaviours: int = 4,
                 window_turns: int | None = None) -> list[dict[str, Any]]:
    """Every conversation's windows, in order: the corpus part of the SFT dataset."""
    return [example for conversation in conversations
            for example in sft_windows(conversation, max_behaviours, window_turns)]
