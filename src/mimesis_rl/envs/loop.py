"""`play`: run many dialogues in lockstep with any agent side and any user side (pure Python).

Each round, every open dialogue's agent turn goes to one `agent.act` call and every user turn
that follows to one `user.respond` call; dialogues that end drop out. The model rollout engine
(`mimesis_rl.rollout`) keeps this shape and swaps the parties for batched generators.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from mimesis_rl.envs.protocols import AgentSide, Environment, EpisodeState, UserReply, UserSide

log = logging.getLogger(__name__)


def _as_reply(reply: Any, who: str) -> UserReply:
    """Accept what a user side returned; turn garbage into an empty reply that the trace flags."""
    if isinstance(reply, UserReply):
        return reply
    kind = type(reply).__name__
    log.warning("%s returned %s instead of a UserReply; recorded as an empty message", who, kind)
    return UserReply(message="", meta={"error": f"user side returned {kind}, not a UserReply"})


def play(
    env: Environment,
    agent: AgentSide,
    user: UserSide,
    seeds: Sequence[int],
    on_round: Callable[[int, list[EpisodeState]], None] | None = None,
) -> list[EpisodeState]:
    """Play one dialogue per seed; returns the finished episodes (trace + verdict), in seed order."""
    states = [env.reset(seed) for seed in seeds]
    if not states:
        return []
    sessions = user.start([s.spec for s in states])
    for state, reply in zip(states, user.opening(sessions), strict=True):
        env.user_turn(state, _as_reply(reply, user.name))
    round_no = 0
    while True:
        active = [i for i, s in enumerate(states) if not s.done]
        if not active:
            break
        round_no += 1
        messages = agent.act([env.observe(states[i]) for i in active])
        if len(messages) != len(active):
            raise ValueError(
                f"agent {agent.name!r} returned {len(messages)} messages for {len(active)} dialogues"
            )
        to_user: list[tuple[int, str]] = []
        for i, message in zip(active, messages, strict=True):
            result = env.step(states[i], message)
            if result.to_user is not None:
                to_user.append((i, result.to_user))
        if to_user:
            replies = user.respond([sessions[i] for i, _ in to_user], [text for _, text in to_user])
            for (i, _), reply in zip(to_user, replies, strict=True):
                env.user_turn(states[i], _as_reply(reply, user.name))
        if on_round is not None:
            on_round(round_no, states)
    return states


def summarize(states: Sequence[EpisodeState]) -> dict[str, Any]:
    """Success rate, mean reward and how episodes ended: the numbers a rollout run reports."""
    n = len(states)
    if n == 0:
        return {
            "n": 0,
            "success_rate": 0.0,
            "mean_reward": 0.0,
            "mean_agent_turns": 0.0,
            "invalid_actions": 0,
            "end_reasons": {},
        }
    verdicts = [s.verdict for s in states if s.verdict is not None]
    return {
        "n": n,
        "success_rate": round(sum(v.success for v in verdicts) / n, 4),
        "mean_reward": round(sum(v.reward for v in verdicts) / n, 4),
        "mean_agent_turns": round(sum(s.agent_turns for s in states) / n, 3),
        "invalid_actions": sum(s.invalid_actions for s in states),
        "end_reasons": dict(sorted(Counter(s.end_reason or "unfinished" for s in states).items())),
    }
