"""Short evaluation rollouts of an agent: success, reward and valid-action rate per domain and user."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mimesis_rl.envs.base import EpisodeState, UserSide
from mimesis_rl.envs.registry import make_env
from mimesis_rl.rollout import ModelAgent, run_rollouts


def action_stats(states: Sequence[EpisodeState]) -> dict[str, float]:
    """valid_action_rate: valid actions / attempted actions; acted_rate: episodes with a valid action."""
    valid = sum(len(s.actions) for s in states)
    invalid = sum(s.invalid_actions for s in states)
    n = max(1, len(states))
    return {
        "valid_action_rate": round(valid / (valid + invalid), 4) if valid + invalid else 0.0,
        "acted_rate": round(sum(1 for s in states if s.actions) / n, 4),
    }


def evaluate(
    agent: ModelAgent,
    users: dict[str, Callable[[str], UserSide]],
    domains: Sequence[str],
    seeds: Sequence[int],
    max_turns: int | None = None,
) -> dict[str, Any]:
    """Per `user` and `domain`: n, success_rate, mean_reward, valid_action_rate, acted_rate, end reasons;
    plus means over domains per user (`<user>.mean.success_rate`, ...)."""
    out: dict[str, Any] = {}
    for user_name, factory in users.items():
        per: dict[str, Any] = {}
        for domain in domains:
            result = run_rollouts(
                make_env(domain, max_turns=max_turns),
                agent,
                factory(domain),
                list(seeds),
                progress=False,
                desc=f"eval {domain}",
            )
            summary = result.summary()
            per[domain] = {
                "n": summary["n"],
                "success_rate": summary["success_rate"],
                "mean_reward": summary["mean_reward"],
                **action_stats(result.states),
                "end_reasons": summary["end_reasons"],
            }
        keys = ("success_rate", "mean_reward", "valid_action_rate", "acted_rate")
        per["mean"] = {k: round(sum(per[d][k] for d in domains) / len(domains), 4) for k in keys}
        out[user_name] = per
    return out
