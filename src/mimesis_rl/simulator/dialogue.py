"""The simulator's view of a dialogue: the role flip (written once), its inverse, and trimming.

The simulator plays the user, so in its chat messages the agent is `user` and the user's own turns
are `assistant` (each in the `<think>` format of `simulator.format`), under its card as the system
message. Everything that shows a dialogue to a simulator goes through `flip_roles`: the runtime's
sessions and stateless prompts, SFT windows (`simulator.sft_data`), the per-turn contexts of real
conversations that the fidelity evaluation and GRPO prompt with (`turn_contexts`), and the HTTP API's
chat requests. `unflip` reads such a prompt back in the data's roles; `trim_messages` drops the
oldest exchanges when a dialogue outgrows the context, the card kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from mimesis_rl.data.schema import Conversation, GoalCard, Turn
from mimesis_rl.simulator.cards import conversation_card
from mimesis_rl.simulator.format import OPENING_CUE, parse_output, render_target


def user_left(conversation: Conversation, index: int) -> bool:
    """Did the user end the conversation with turn `index`? (the last turn, and a user turn; a turn
    whose `meta["ended"]` is set says so itself: a dialogue cut on purpose after a reply that did not
    leave, `env_data.episode_conversation(keep_last=True)`)."""
    turn = conversation.turns[index]
    if turn.role != "user":
        return False
    if "ended" in turn.meta:
        return bool(turn.meta["ended"])
    return index == len(conversation.turns) - 1


def flip_roles(card: str, turns: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The simulator's view of a dialogue (the role flip, written once): its card as the system message,
    the agent's turns as `user`, the user's own turns as `assistant`; when the user speaks first (or
    nothing was said yet) the opening cue stands in for the agent's missing message.

    turns: (role in the data, `user` or `assistant`; the text as the simulator sees it: the user's own
    turns already rendered as it writes them, e.g. by `render_target`).
    """
    messages = [{"role": "system", "content": card}]
    if not turns or turns[0][0] == "user":
        messages.append({"role": "user", "content": OPENING_CUE})
    return messages + flip_turns(turns)


def flip_turns(turns: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """(data role, text) pairs as the simulator's chat messages: a user turn is its own (`assistant`),
    anything else the other side's (`user`)."""
    return [{"role": "assistant" if role == "user" else "user", "content": text} for role, text in turns]


def flipped_messages(conversation: Conversation, upto: int | None = None,
                     max_behaviours: int = 4) -> list[dict[str, str]]:
    """System card + turns[:upto] with roles flipped; the simulator's turns carry their reasoning."""
    end = len(conversation.turns) if upto is None else min(upto, len(conversation.turns))
    return flip_roles(conversation_card(conversation, max_behaviours), _own_view(conversation, 0, end))


def flipped_turns(conversation: Conversation, start: int, end: int) -> list[dict[str, str]]:
    """turns[start:end] with roles flipped; user turns rendered as `<think>` targets."""
    return flip_turns(_own_view(conversation, start, end))


def _own_view(conversation: Conversation, start: int, end: int) -> list[tuple[str, str]]:
    """turns[start:end] as (role, text) with the user's turns rendered as `<think>` targets."""
    out = []
    for i in range(start, end):
        turn = conversation.turns[i]
        if turn.role == "user":
            out.append(("user", render_target(turn.reasoning, turn.content, user_left(conversation, i))))
        else:
            out.append((turn.role, turn.content))
    return out


@dataclass(frozen=True)
class TurnContext:
    """The context of one real user turn: what the simulator sees and what the real user did."""

    conversation_id: str
    domain: str
    turn_index: int
    prompt: list[dict[str, str]]
    real: Turn
    ended: bool
    goal: GoalCard | None
    agent_message: str | None  # the agent turn just before (None for an opening)
    user_turn_number: int  # 0 for the user's first turn

    @property
    def is_first(self) -> bool:
        return self.user_turn_number == 0


def turn_contexts(conversation: Conversation, max_behaviours: int = 4) -> Iterator[TurnContext]:
    """One TurnContext per user turn: the prompt up to it and the real turn as the reference."""
    n_user = 0
    for i, turn in enumerate(conversation.turns):
        if turn.role != "user":
            continue
        previous = conversation.turns[i - 1] if i > 0 else None
        yield TurnContext(
            conversation_id=conversation.conversation_id,
            domain=conversation.domain,
            turn_index=i,
            prompt=flipped_messages(conversation, i, max_behaviours),
            real=turn,
            ended=user_left(conversation, i),
            goal=conversation.goal,
            agent_message=previous.content if previous is not None and previous.role == "assistant" else None,
            user_turn_number=n_user,
        )
        n_user += 1


def trim_messages(messages: Sequence[Mapping[str, str]], count_tokens: Callable[[list[dict[str, str]]], int],
                  limit: int) -> list[dict[str, str]]:
    """Drop the oldest exchanges (never the system card or the last message) until the prompt fits."""
    kept = [dict(m) for m in messages]
    while count_tokens(kept) > limit and len(kept) > 2:
        kept = [kept[0], *kept[3:]] if len(kept) > 3 else [kept[0], kept[-1]]
    return kept


def unflip(prompt: Sequence[Mapping[str, str]]) -> list[Turn]:
    """The dialogue a flipped prompt holds, back in the data's roles (system card and cue dropped).

    Past simulator turns are parsed, so a context-aware labeler sees only what was said.
    """
    turns: list[Turn] = []
    for message in prompt:
        role, content = message.get("role"), str(message.get("content", ""))
        if role == "system" or (role == "user" and content == OPENING_CUE):
            continue
        if role == "assistant":
            parsed = parse_output(content)
            if parsed.ok:
                turns.append(Turn(role="user", content=parsed.message, reasoning=parsed.reasoning or None))
        elif content.strip():
            turns.append(Turn(role="assistant", content=content))
    return turns
