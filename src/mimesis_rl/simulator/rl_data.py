"""GRPO prompts for the simulator, mixed from several domains.

Two sources: contexts of real user turns from the training conversations (with the real turn's
patterns and length as references), and contexts of environment dialogues on the task environments'
goal cards (no real turn; they exercise goal pursuit, goal consistency and paced disclosure, where
over-cooperation starts and chit-chat forgets the goal). Each row carries, as plain columns, what
the reward functions read.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from mimesis_rl.data.schema import Conversation, GoalCard
from mimesis_rl.simulator.decisions import DecisionItem, answer_forms, domain_items, episodes_for, replay
from mimesis_rl.simulator.dialogue import TurnContext, turn_contexts
from mimesis_rl.simulator.rewards.slots import revealed_slots

log = logging.getLogger(__name__)

# The decision rewards' columns (`simulator.decisions`): empty on rows where no decision is asked for.
NO_DECISION: dict[str, str] = {"decision": "", "decision_kind": "", "asked_slots": "[]", "answer_forms": "{}"}


def _goal_columns(goal: GoalCard | None) -> dict[str, str]:
    if goal is None:
        return {"goal_slots": "{}", "private_slots": "[]"}
    return {"goal_slots": json.dumps(goal.slots, default=str), "private_slots": json.dumps(goal.private)}


def corpus_row(ctx: TurnContext, earlier_user_messages: Sequence[str]) -> dict[str, Any]:
    slots = ctx.goal.slots if ctx.goal else {}
    revealed = sorted({k for text in earlier_user_messages for k in revealed_slots(slots, text)})
    return {
        "prompt": ctx.prompt,
        "source": "corpus",
        "domain": ctx.domain,
        "agent_message": ctx.agent_message or "",
        "real_message": ctx.real.content,
        "real_patterns": json.dumps(ctx.real.patterns),
        "user_turn_number": ctx.user_turn_number,
        "revealed": json.dumps(revealed),
        **_goal_columns(ctx.goal),
        **NO_DECISION,
    }


def corpus_rows(conversations: Iterable[Conversation], per_domain: int, seed: int = 0,
                max_behaviours: int = 4) -> list[dict[str, Any]]:
    """Up to `per_domain` user-turn contexts per domain, sampled evenly across conversations."""
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for conv in conversations:
        said: list[str] = []
        for ctx in turn_contexts(conv, max_behaviours):
            by_domain[conv.domain].append(corpus_row(ctx, said))
            said.append(ctx.real.content)
    rng = random.Random(seed)
    rows = []
    for domain in sorted(by_domain):
        candidates = by_domain[domain]
        rng.shuffle(candidates)
        rows.extend(candidates[:per_domain])
    return rows


def env_rows(domains: Sequence[str] | None, per_domain: int, seed: int = 0, max_behaviours: int = 4,
             presets: Sequence[str] = ("cooperative", "train_mix"), turns: str = "opening",
             episodes_per_domain: int | None = None) -> list[dict[str, Any]]:
    """Contexts of environment dialogues (scripted agent vs training-role scripted users, seeded goal
    cards; `simulator.env_data`), `per_domain` per domain: only the openings (`turns="opening"`), or
    any user turn (`"all"`: the agent has asked for something and the user must answer on its card).

    The card is the one `UserSimulator.card` renders for a learned simulator: `system_card(domain,
    goal, persona)` without a behaviour line; `max_behaviours` is unused (kept for callers). There is
    no real turn to compare with (`real_patterns` None); `revealed` lists the slots earlier user turns
    stated, so paced disclosure judges only what is new.
    """
    from mimesis_rl.simulator.env_data import EnvDialogues, play_dialogues

    if turns not in ("opening", "all"):
        raise ValueError(f"env_rows: turns must be `opening` or `all`, got {turns!r}")
    episodes = episodes_per_domain or max(1, per_domain if turns == "opening" else -(-per_domain // 2))
    settings = EnvDialogues(presets=list(presets), domains=list(domains) if domains is not None else None,
                            episodes_per_domain=episodes)
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for conv in play_dialogues(settings, seed):
        said: list[str] = []
        for ctx in turn_contexts(conv, 0):
            if turns == "all" or ctx.is_first:
                row = corpus_row(ctx, said)
                row.update(source="env", real_message="", real_patterns=None)
                by_domain[conv.domain].append(row)
            said.append(ctx.real.content)
    rng = random.Random(seed)
    rows = []
    for domain in sorted(by_domain):
        candidates = by_domain[domain]
        rng.shuffle(candidates)
        rows.extend(candidates[:per_domain])
    return rows


def item_row(item: DecisionItem) -> dict[str, Any]:
    """A GRPO prompt row: the item replayed with the card user, its last user turn's context."""
    state, _ = replay(item.domain, item.seed, item.agent_messages)
    conversation = state.to_conversation()
    contexts = list(turn_contexts(conversation, 0))
    said = [c.real.content for c in contexts[:-1]]
    row = corpus_row(contexts[-1], said)
    expected = "" if item.expected_accept is None else "accept" if item.expected_accept else "reject"
    forms = answer_forms(item.domain, state.goal.slots, item.asked_slots)
    row.update(source="decision", real_message="", real_patterns=None, decision=expected,
               decision_kind=item.kind, asked_slots=json.dumps(list(item.asked_slots)),
               answer_forms=json.dumps(forms))
    return row


def decision_rows(domains: Sequence[str] | None, per_domain: int, seed: int = 0,
                  episodes_per_domain: int = 4) -> list[dict[str, Any]]:
    """GRPO prompts at decision and question states, `per_domain` per domain (see
    `simulator.decisions.domain_items`). An episode holds one proposal its card turns down, so the
    episodes grow with `per_domain` as `env_data.decision_dialogues`' do (4 episodes held 57 of the 96
    prompts that 24 a domain asked for in 4 domains; `decisions.episodes_for`)."""
    items = domain_items(domains, per_domain, seed, episodes_for(per_domain, episodes_per_domain))
    short = {d: n for d, n in Counter(i.domain for i in items).items() if n < per_domain}
    if short:
        log.warning("sim_rl decision prompts: fewer than %d in %s (the domain's states ran out)",
                    per_domain, ", ".join(f"{d} {n}" for d, n in sorted(short.items())))
    return [item_row(i) for i in items]


def build_prompts(conversations: Iterable[Conversation], corpus_per_domain: int, env_per_domain: int,
                  env_domains: Sequence[str] | None = None, seed: int = 0, max_behaviours: int = 4,
                  env_presets: Sequence[str] = ("cooperative", "train_mix"),
                  env_turns: str = "opening", decision_per_domain: int = 0,
                  decision_episodes: int = 4) -> list[dict[str, Any]]:
    """Corpus contexts + environment contexts + decision states (`simulator.decisions`), shuffled
    together."""
    rows = corpus_rows(conversations, corpus_per_domain, seed, max_behaviours)
    if env_per_domain > 0:
        rows += env_rows(env_domains, env_per_domain, seed, max_behaviours, env_presets, env_turns)
    if decision_per_domain > 0:
        rows += decision_rows(env_domains, decision_per_domain, seed, decision_episodes)
    if not rows:
        raise ValueError("no RL prompts: no user turns in the corpus and no environment prompts asked for")
    random.Random(seed + 1).shuffle(rows)
    return rows


def length_range(conversations: Iterable[Conversation], low: float = 0.05,
                 high: float = 0.95) -> tuple[float, float]:
    """The low/high quantiles of real user-turn lengths in words (the format reward's range)."""
    import numpy as np

    lengths = [len(t.content.split()) for c in conversations for t in c.user_turns]
    if not lengths:
        return (1.0, 60.0)
    lo, hi = np.quantile(lengths, [low, high])
    return (max(1.0, float(lo)), max(float(hi), 2.0))
