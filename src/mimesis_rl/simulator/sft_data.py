"""Corpus conversations as simulator SFT examples: role-flipped windows under the conversation's card.

Each example is a chat whose `assistant` messages are the user's turns in the `<think>` format (the
loss covers those); a long conversation becomes consecutive windows, each under the card and each
ending on a user turn, the way the runtime shows a trimmed dialogue at inference time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mimesis_rl.data.schema import Conversation
from mimesis_rl.simulator.cards import conversation_card
from mimesis_rl.simulator.dialogue import flipped_messages, flipped_turns
from mimesis_rl.simulator.format import OPENING_CUE

TokenCounter = Callable[[list[dict[str, Any]]], int]


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


def fit_window(messages: Sequence[Mapping[str, Any]], count_tokens: TokenCounter,
               limit: int) -> list[list[dict[str, Any]]]:
    """A window longer than `limit` tokens, as windows that fit: each keeps the card and the most
    recent exchanges that fit before its last simulator turn, the way `trim_messages` shows a dialogue
    at inference; the older exchanges become windows of their own.

    Why: the trainer cuts a long example at its end, which is where a window's last simulator turn
    (a decision, a leaving) sits: at 384 tokens 40-50% of the environment windows' simulator tokens
    were never trained. A window whose last exchange alone overflows stays as it is: split off, that
    exchange would lose its only target to the cut and the trainer would drop it whole.
    """
    kept = [dict(m) for m in messages]
    if count_tokens(kept) <= limit or len(kept) < 4:
        return [kept]
    card, body = kept[0], kept[1:]
    # where a window may start: an agent-side message right after a simulator turn
    starts = [i for i in range(1, len(body))
              if body[i]["role"] == "user" and body[i - 1]["role"] == "assistant"]
    if not starts:
        return [kept]
    start = next((s for s in starts if count_tokens([card, *body[s:]]) <= limit), None)
    if start is None:
        return [kept]
    return [*fit_window([card, *body[:start]], count_tokens, limit), [card, *body[start:]]]


def fit_windows(examples: Iterable[dict[str, Any]], count_tokens: TokenCounter | None,
                limit: int | None) -> list[dict[str, Any]]:
    """Every example's window fitted to `limit` tokens (`fit_window`); None = no limit, as they are."""
    if not limit or count_tokens is None:
        return list(examples)
    return [{**example, "messages": window} for example in examples
            for window in fit_window(example["messages"], count_tokens, limit)]
