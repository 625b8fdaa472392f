"""Short evaluation rollouts of an agent: success, reward and valid-action rate per domain and user."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mimesis_rl.envs.loop import summarize
from mimesis_rl.envs.multi import MultiDomainEnv
from mimesis_rl.envs.protocols import AgentSide, EpisodeState, UserSide
from mimesis_rl.envs.registry import make_env
from mimesis_rl.rollout import run_rollouts
from mimesis_rl.stats import interval_verdict, paired_difference


def action_stats(states: Sequence[EpisodeState]) -> dict[str, float]:
    """valid_action_rate: valid actions / attempted actions; acted_rate: episodes with a valid action."""
    valid = sum(len(s.actions) for s in states)
    invalid = sum(s.invalid_actions for s in states)
    n = max(1, len(states))
    return {
        "valid_action_rate": round(valid / (valid + invalid), 4) if valid + invalid else 0.0,
        "acted_rate": round(sum(1 for s in states if s.actions) / n, 4),
    }


def dialogue_outcomes(seeds: Sequence[int], states: Sequence[EpisodeState]) -> dict[str, dict[str, float]]:
    """Per seed (as a string, for JSON): reward and success, so before/after can be compared in pairs."""
    return {
        str(seed): {
            "reward": float(s.verdict.reward) if s.verdict else 0.0,
            "success": 1.0 if s.verdict and s.verdict.success else 0.0,
        }
        for seed, s in zip(seeds, states, strict=True)
    }


def paired_gain(
    before: dict[str, Any], after: dict[str, Any], key: str, n_boot: int = 2000, confidence: float = 0.95
) -> dict[str, Any]:
    """after - before of `key` (reward | success) over the same (domain, seed) dialogues, with a paired
    bootstrap interval that weighs every domain the same (`stats.paired_difference`)."""

    def flat(res: dict[str, Any]) -> dict[tuple[str, str], float]:
        return {
            (domain, seed): out[key]
            for domain, per in res.items()
            if domain != "mean"
            for seed, out in per.get("dialogues", {}).items()
        }

    gain = paired_difference(flat(after), flat(before), n_boot, confidence, strata=lambda k: k[0])
    gain["verdict"] = interval_verdict(gain["ci"])
    return gain


def evaluate(
    agent: AgentSide,
    users: dict[str, Callable[[str], UserSide]],
    domains: Sequence[str],
    seeds: Sequence[int],
    max_turns: int | None = None,
    keep_dialogues: bool = False,
) -> dict[str, Any]:
    """Per `user` and `domain`: n, success_rate, mean_reward, valid_action_rate, acted_rate, end reasons
    (and with `keep_dialogues`, each seed's reward and success: `dialogue_outcomes`); plus means over
    domains per user (`<user>.mean.success_rate`, ...)."""
    plan = [(domain, seed) for domain in domains for seed in seeds]
    envs = {domain: make_env(domain, max_turns=max_turns) for domain in domains}
    out: dict[str, Any] = {}
    for user_name, factory in users.items():
        # Every domain in one lockstep batch: a model user is one side for all domains, so its turns
        # and the agent's are generated together (the engine's batching pays where rows are many).
        sides = {domain: factory(domain) for domain in domains}
        result = run_rollouts(
            MultiDomainEnv(envs, plan, name="eval", description="agent evaluation, every domain at once"),
            agent,
            [sides[domain] for domain, _ in plan],
            list(range(len(plan))),
            progress=False,
            desc=f"eval {user_name}",
        )
        per: dict[str, Any] = {}
        for domain in domains:
            states = [s for s, (d, _) in zip(result.states, plan, strict=True) if d == domain]
            summary = summarize(states)
            per[domain] = {
                "n": summary["n"],
                "success_rate": summary["success_rate"],
                "mean_reward": summary["mean_reward"],
                **action_stats(states),
                "end_reasons": summary["end_reasons"],
            }
            if keep_dialogues:
                per[domain]["dialogues"] = dialogue_outcomes(seeds, states)
        keys = ("success_rate", "mean_reward", "valid_action_rate", "acted_rate")
        per["mean"] = {k: round(sum(per[d][k] for d in domains) / len(domains), 4) for k in keys}
        out[user_name] = per
    return out
