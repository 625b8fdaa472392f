"""Environment SFT windows that end on a decision: the user's reply to a pending proposal or to a
question about one of its goal slots.

Windows of ~`window_turns` turns end wherever the dialogue happens to cut them, so the turn a window
ends on (the last thing the simulator learns to write before the card is shown again) is a decision
only by chance. `sim_sft.env.decision_share` makes it a share: that share of the environment pool
are windows cut to end right after a decision turn, grounded in the reasoning the scripted user
wrote for it ("They offer $420; I'd pay at most $500, ..."). `decision_end_share` measures the
share of a pool, so the setting's effect is a number, not a hope.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from mimesis_rl.data.schema import Conversation
from mimesis_rl.simulator.cards import PROPOSAL, conversation_card
from mimesis_rl.simulator.dialogue import flipped_turns, user_left
from mimesis_rl.simulator.format import OPENING_CUE, THINK_CLOSE, THINK_OPEN, render_target

QUESTION = "question"  # the other kind, PROPOSAL, is the cards' own (they keep it out of the behaviour line)
SPANS = ("clause", "reply", "act")  # `verdict_span`'s choices ("act" needs `env.verdict_first`)
VERDICT_CUE = ", so "  # every domain's card user grounds a verdict as "<the facts>, so <verdict>: <act>"
GROUNDS_OPEN = "They"  # ... and states the facts from the other side's move first ("They offer $420; ...")
ACT_OPEN = "I'll "  # every act a card user decides by ("I'll take it", "I'll counter at $393")


def decision_kind(domain: str, agent_message: str | None, reply_meta: dict[str, Any]) -> str | None:
    """`proposal` when the scripted user answered a pending proposal (its reply says whether it
    accepts), `question` when the agent's message asks about a goal slot (the domain policy's own
    `ask_patterns`), else None."""
    if "accept" in reply_meta:
        return PROPOSAL
    if not agent_message:
        return None
    from mimesis_rl.envs.registry import domain as env_domain

    policy = env_domain(domain).user_policy()
    return QUESTION if any(policy.asks(agent_message, slot) for slot in policy.ask_patterns) else None


def decision_turns(conversation: Conversation) -> list[int]:
    """Indices of the user turns marked as decisions (`meta["decision"]`, set by env_data)."""
    return [i for i, t in enumerate(conversation.turns) if t.role == "user" and t.meta.get("decision")]


def window_ending_at(conversation: Conversation, end: int, max_behaviours: int,
                     window_turns: int | None) -> dict[str, Any]:
    """The window of up to `window_turns` turns that ends right after turn `end - 1` (a user turn),
    opening on the agent side like every SFT window."""
    turns = conversation.turns
    start = max(0, end - window_turns) if window_turns else 0
    messages = [{"role": "system", "content": conversation_card(conversation, max_behaviours)}]
    if turns[start].role == "user":
        before = [t.content for t in turns[:start] if t.role != "user"]
        messages.append({"role": "user", "content": before[-1] if before else OPENING_CUE})
    return {"messages": messages + flipped_turns(conversation, start, end)}


def decision_targets(conversations: Sequence[Conversation], kind: str | None = None) -> set[str]:
    """The rendered targets of every decision turn (of `kind` only, when given): a window ends on a
    decision when its last simulator message is one of them."""
    return {render_target(c.turns[i].reasoning, c.turns[i].content, user_left(c, i))
            for c in conversations for i in decision_turns(c)
            if kind is None or c.turns[i].meta.get("decision") == kind}


def verdict_span(target: str, span: str = "clause") -> str | None:
    """The part of a proposal reply that decides it, from the reasoning's last "so": `clause` up to
    its first colon (" so $470 is over my $427 limit", " so 19 is short of it", " so it matches"),
    `reply` on through the delivered message ("...: I'll counter at $393.</think>That's too much for
    me. How about $393?"). It starts on a word, so it tokenizes the same alone and in context. `act`:
    the act a verdict-first reasoning opens with ("I'll take it" of "<think>I'll take it: They offer
    ..."; `act_first`), whose first tokens follow `<think>` alone. None when there is no such part."""
    if span not in SPANS:
        raise ValueError(f"verdict span {span!r} is not one of {SPANS}")
    if span == "act":
        return leading_act(target[len(THINK_OPEN):]) if target.startswith(THINK_OPEN) else None
    close = target.find(THINK_CLOSE)
    cut = target.rfind(VERDICT_CUE, 0, close if close >= 0 else len(target))
    if cut < 0:
        return None
    reply = target[cut + 1 :]
    colon = reply.find(":")
    return reply[:colon] if span == "clause" and colon > 0 else reply


def leading_act(reasoning: str) -> str | None:
    """The act a verdict-first reasoning opens with, up to its colon ("I'll take it" of "I'll take it:
    they offer ..."); None when it does not open with one."""
    colon = reasoning.find(":")
    return reasoning[:colon] if reasoning.startswith(ACT_OPEN) and colon > 0 else None


def act_first(reasoning: str) -> str:
    """The card user's grounded thought with its act first: "They offer $420; I'd pay at most $500, so
    $420 is within my limit: I'll take it." -> "I'll take it: they offer $420; I'd pay at most $500, so
    $420 is within my limit." Other thoughts stay where they are; reasoning without a grounded verdict
    is returned as is.

    Why: a small simulator starts the facts-first template in its own dialogues and loses it before the
    verdict (issue 27: in campsite, travel and content it states one in 0-4 of 19-48 replies to a
    proposal), so the decision never gets written. Act first, the decision is the reply's first words,
    and the facts after it are its reasons."""
    cut = reasoning.rfind(VERDICT_CUE)
    if cut < 0:
        return reasoning
    start, colon = reasoning.rfind(GROUNDS_OPEN, 0, cut), reasoning.find(": " + ACT_OPEN, cut)
    if start < 0 or colon < 0:
        return reasoning
    stop = reasoning.find(".", colon)
    stop = len(reasoning) if stop < 0 else stop
    act, grounds = reasoning[colon + 2 : stop], reasoning[start:colon]
    rest = reasoning[stop + 1 :].lstrip()
    thought = f"{act}: {grounds[0].lower()}{grounds[1:]}."
    return " ".join(part for part in (reasoning[:start].rstrip(), thought, rest) if part)


def with_act_first(conversations: Sequence[Conversation]) -> list[Conversation]:
    """`conversations` with every reply to a proposal reasoning act first (`act_first`)."""
    out = []
    for conv in conversations:
        turns = [t.model_copy(update={"reasoning": act_first(t.reasoning)})
                 if t.meta.get("decision") == PROPOSAL and t.reasoning else t for t in conv.turns]
        out.append(conv.model_copy(update={"turns": turns}))
    return out


def with_verdict_spans(windows: list[dict[str, Any]], conversations: Sequence[Conversation],
                       column: str, span: str = "clause") -> list[dict[str, Any]]:
    """Every window with `column`: the verdict span of its last simulator message when that message
    answers a pending proposal of `conversations`, else "" (so every row has the column)."""
    targets = decision_targets(conversations, PROPOSAL)
    out = []
    for window in windows:
        last = window["messages"][-1]["content"]
        out.append({**window, column: (verdict_span(last, span) or "") if last in targets else ""})
    return out


def ends_on_decision(window: dict[str, Any], targets: set[str]) -> bool:
    return window["messages"][-1]["content"] in targets


def decision_end_share(windows: Sequence[dict[str, Any]], conversations: Sequence[Conversation]) -> float:
    """Share of `windows` whose last simulator turn is a decision of `conversations`."""
    if not windows:
        return 0.0
    targets = decision_targets(conversations)
    return sum(ends_on_decision(w, targets) for w in windows) / len(windows)


def with_decision_share(windows: list[dict[str, Any]], conversations: Sequence[Conversation],
                        share: float, max_behaviours: int, window_turns: int | None,
                        seed: int = 0) -> list[dict[str, Any]]:
    """A pool of as many windows as `windows`, `share` of them ending on a decision turn (windows cut
    at each decision, drawn in a seeded cycle), the rest the windows that do not; share 0 = as is."""
    if share <= 0 or not windows:
        return windows
    rng = random.Random(f"decision-windows:{seed}")
    deciding = []
    for conv in conversations:
        limit = max_behaviours if rng.random() < 0.5 else 0  # half with a behaviour line, as env_windows
        deciding += [window_ending_at(conv, i + 1, limit, window_turns) for i in decision_turns(conv)]
    if not deciding:
        return windows
    targets = decision_targets(conversations)
    others = [w for w in windows if not ends_on_decision(w, targets)]
    n_decision = round(share * len(windows)) if others else len(windows)
    pool = cycled(deciding, n_decision, rng) + cycled(others, len(windows) - n_decision, rng)
    rng.shuffle(pool)
    return pool


def cycled(items: list[dict[str, Any]], n: int, rng: random.Random) -> list[dict[str, Any]]:
    """n items in seeded orders of the whole list, one after another (repeating once it runs out)."""
    out: list[dict[str, Any]] = []
    while items and len(out) < n:
        out += rng.sample(items, min(len(items), n - len(out)))
    return out
