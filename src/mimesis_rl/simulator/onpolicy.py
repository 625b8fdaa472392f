"""On-policy relabelling (DAgger for the simulator): the states the simulator itself reaches, with the
card user's decision as the target.

Every SFT route so far trained decisions in states the card user or the scripted users reached: the
card user's own opening and replies before the proposal. In its own dialogues the simulator says
something else first, the agent answers that, and where its card accepts it said neither yes nor no
21 times in 23 (`eval.decisions.dialogue_decisions`, issue 27). Here the simulator being continued
plays the scripted agent on training seeds; at every agent message the card user, replayed over the
same agent messages, answers as a proposal or a question (`decision_windows.decision_kind`), the
dialogue is cut there and that reply (its grounded reasoning and message) becomes the last turn. The
simulator's own earlier turns stay as context and are not trained (`LAST_TURN_COLUMN`): they are
its own samples, including the non-answers this is meant to unlearn.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mimesis_rl.data.schema import Conversation, Turn
from mimesis_rl.simulator.decision_windows import (
    PROPOSAL,
    QUESTION,
    cycled,
    decision_kind,
    decision_targets,
    window_ending_at,
)
from mimesis_rl.simulator.env_data import BEHAVIOUR_LINE_SHARE, SEED_BASE, episode_conversation

log = logging.getLogger(__name__)

PRESET = "onpolicy"  # the `outcome.preset` of a relabelled dialogue
SEED_OFFSET = 500_000  # goals of their own, above env_data's scripted dialogues and decision items
LAST_TURN_COLUMN = "last_turn_only"  # `training.span_weights.LAST_TURN_COLUMN` (that module imports TRL)


def play_states(user: Any, per_domain: int, domains: Sequence[str] | None = None, seed: int = 0) -> list[Any]:
    """The scripted agent against `user` (a learned simulator), `per_domain` dialogues per domain on
    training seeds (`env_data.SEED_BASE` + `SEED_OFFSET`, away from the curve's and evaluation's)."""
    from mimesis_rl.simulator.curve import env_dialogues

    return env_dialogues(user, per_domain, domains, seed_base=SEED_BASE + SEED_OFFSET + seed * 10_000)


def relabelled(states: Sequence[Any], kinds: Sequence[str] = (PROPOSAL, QUESTION),
               balanced: bool = False) -> list[Conversation]:
    """One conversation per decision the dialogues met: the dialogue as played up to the agent's
    message, then the card user's reply to it. An agent message the card user never reaches (it
    accepted something earlier) or answers as neither kind is skipped. `balanced`: every proposal
    also comes with its counterpart (`decisions.other_side`) in the agent's place, so the card
    accepts exactly half of the relabelled proposals."""
    from mimesis_rl.envs.actions import reply_accepts
    from mimesis_rl.simulator.decisions import DecisionItem, other_side, replay_many

    out = []
    for domain in sorted({s.domain for s in states}):
        cuts: list[tuple[Conversation, int, DecisionItem]] = []
        for state in (s for s in states if s.domain == domain):
            conv = episode_conversation(state, PRESET, keep_last=True)
            if conv is None:
                continue
            sent: list[str] = []
            for j, turn in enumerate(conv.turns):
                if turn.role == "assistant":
                    sent.append(turn.content)
                    cuts.append((conv, j, DecisionItem(domain, int(state.seed), tuple(sent), "replay")))
        counterparts: list[tuple[Conversation, int, DecisionItem]] = []
        for (conv, j, item), (_, reply) in zip(cuts, replay_many([c[2] for c in cuts]), strict=True):
            if reply is None or not reply.message.strip():
                continue
            kind = decision_kind(domain, conv.turns[j].content, reply.meta)
            if kind not in kinds:
                continue
            out.append(_cut(conv, j, conv.turns[j], reply, kind))
            if balanced and kind == PROPOSAL:
                other = other_side(domain, item.seed, item.agent_messages[:-1], reply_accepts(reply))
                counterparts += [(conv, j, other)] if other is not None else []
        for (conv, j, other), (_, reply) in zip(counterparts, replay_many([c[2] for c in counterparts]),
                                                strict=True):
            if reply is not None and reply.message.strip():  # `other_side` saw it answered as a proposal
                agent = Turn(role="assistant", content=other.agent_messages[-1])
                out.append(_cut(conv, j, agent, reply, PROPOSAL, suffix="-other"))
    log.info("on-policy relabelling: %d decisions (%d proposals) from %d dialogues", len(out),
             sum(c.turns[-1].meta["decision"] == PROPOSAL for c in out), len(states))
    return out


def _cut(conv: Conversation, j: int, agent: Turn, reply: Any, kind: str, suffix: str = "") -> Conversation:
    """`conv` up to turn `j` (the simulator's own turns as context, not decisions), `agent` in turn j's
    place, then the card user's `reply` as the decision to learn."""
    target = Turn(role="user", content=reply.message, reasoning=reply.reasoning or None,
                  patterns=list(reply.patterns), meta={"decision": kind, "ended": False})
    context = [t.model_copy(update={"meta": {k: v for k, v in t.meta.items() if k != "decision"}})
               for t in [*conv.turns[:j], agent]]
    return conv.model_copy(update={"conversation_id": f"{conv.conversation_id}-at{j}{suffix}",
                                   "turns": [*context, target]})


def onpolicy_windows(conversations: Sequence[Conversation], max_behaviours: int, window_turns: int | None,
                     seed: int = 0) -> list[dict[str, Any]]:
    """Each relabelled conversation as the window that ends on its relabelled reply (a seeded half
    with a behaviour line, as `env_data.env_windows`), marked to train that reply alone."""
    rng = random.Random(f"onpolicy-windows:{seed}")
    out = []
    for conv in conversations:
        limit = max_behaviours if rng.random() < BEHAVIOUR_LINE_SHARE else 0
        window = window_ending_at(conv, len(conv.turns), limit, window_turns)
        out.append({**window, LAST_TURN_COLUMN: True})
    return out


def mixed_pool(env: list[dict[str, Any]], onpolicy: list[dict[str, Any]], share: float,
               seed: int = 0) -> list[dict[str, Any]]:
    """A pool as large as `env` (at least as large as `onpolicy`), `share` of it on-policy windows
    (cycled in a seeded order), every row with the `LAST_TURN_COLUMN` flag so the dataset's columns
    agree."""
    if not onpolicy or share <= 0:
        return env
    rng = random.Random(f"onpolicy-pool:{seed}")
    size = max(len(env), len(onpolicy))
    n_on = round(share * size) if env else size
    others = [{**w, LAST_TURN_COLUMN: False} for w in cycled(env, size - n_on, rng)]
    pool = cycled(onpolicy, n_on, rng) + others
    rng.shuffle(pool)
    return pool


def kept_whole(windows: Sequence[dict[str, Any]],
               conversations: Sequence[Conversation]) -> list[dict[str, Any]]:
    """Drop the pieces `sft_data.fit_window` split off an on-policy window: they end on one of the
    simulator's own replies, which is context here, never a target."""
    targets = decision_targets(conversations)
    return [w for w in windows if not w.get(LAST_TURN_COLUMN) or w["messages"][-1]["content"] in targets]


def relabel_simulator(folder: str | Path, per_domain: int, domains: Sequence[str] | None = None,
                      seed: int = 0, base_model: str | Path = "models/base", device: str = "auto",
                      cache: str | Path | None = None, balanced: bool = False) -> list[Conversation]:
    """`folder`'s simulator plays (`play_states`), its decisions relabelled (`relabelled`). With `cache`,
    the conversations are written there and read back on a rerun (a resumed training run does not
    replay minutes of dialogues; delete the file to play again)."""
    from mimesis_rl.data.jsonl import read_conversations, write_jsonl
    from mimesis_rl.simulator.runtime import UserSimulator

    if cache is not None and Path(cache).exists():
        kept = read_conversations(cache)
        log.info("on-policy relabelling: %d decisions kept from %s", len(kept), cache)
        return kept
    user = UserSimulator.load(folder, device=device, base_model=base_model, batch_size=16, seed=seed)
    out = relabelled(play_states(user, per_domain, domains, seed), balanced=balanced)
    del user
    if cache is not None:
        write_jsonl(cache, out)
    return out
