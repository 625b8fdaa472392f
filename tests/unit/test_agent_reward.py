"""agent_rl's outcome-first reward on real episodes: success dominates, partial credit breaks ties."""

from __future__ import annotations

import pytest

from mimesis_rl.agent.rl_reward import RewardWeights, reward_funcs
from mimesis_rl.agent.rl_settings import AgentRLSettings
from mimesis_rl.envs.loop import play
from mimesis_rl.envs.protocols import EpisodeState, Observation
from mimesis_rl.envs.registry import make_env, scripted_agent, scripted_user
from mimesis_rl.envs.scripted.agent import ScriptedAgent


def _floor_offer(obs: Observation) -> str:
    """Offer at the seller's minimum at once: accepted by a cooperative buyer, a deal with share 0."""
    floor = obs.public["floor"]
    return f'Yours for {floor}. <action>{{"type": "offer", "price": {floor}}}</action>'


def _rows(states: list[EpisodeState]) -> dict[str, list]:
    """What `rl_rollout`'s rows hand the reward functions (the keyword lists TRL passes on)."""
    return {
        "reward": [s.verdict.reward if s.verdict else 0.0 for s in states],
        "success": [bool(s.verdict and s.verdict.success) for s in states],
        "agent_turns": [s.agent_turns for s in states],
    }


def _trl_sum(weights: RewardWeights, rows: dict[str, list]) -> list[float]:
    """TRL's `sum_then_normalize` total: reward_weights · each function's output."""
    parts = [f([None] * len(rows["reward"]), **rows) for f in reward_funcs()]
    return [sum(w * p[i] for w, p in zip(weights.trl_weights, parts, strict=True))
            for i in range(len(rows["reward"]))]


def test_outcome_first_on_real_bargain_episodes() -> None:
    env, user = make_env("bargain", max_turns=4), scripted_user("bargain", "cooperative")
    seeds = [0, 1, 2]
    won = play(env, scripted_agent("bargain"), user, seeds)
    cheap = play(env, ScriptedAgent(_floor_offer, "floor"), user, seeds)
    idle = play(env, scripted_agent("bargain", "never_act"), user, seeds)
    assert all(s.verdict.success for s in won)
    assert all(s.accepted and not s.verdict.success and s.verdict.reward == pytest.approx(0.3) for s in cheap)
    assert all(s.verdict.reward == 0.0 for s in idle)

    weights = RewardWeights(success=1.0, verifier=0.2, turn_cost=0.02)
    for states in (won, cheap, idle):
        rows = _rows(states)
        expected = [1.0 * s + 0.2 * r - 0.02 * t
                    for s, r, t in zip(rows["success"], rows["reward"], rows["agent_turns"], strict=True)]
        assert _trl_sum(weights, rows) == pytest.approx(expected)
        parts = zip(rows["success"], rows["reward"], rows["agent_turns"], strict=True)
        assert [weights.total(s, r, t) for s, r, t in parts] == pytest.approx(expected)
    total = {name: _trl_sum(weights, _rows(states)) for name, states in
             (("won", won), ("cheap", cheap), ("idle", idle))}
    # a successful deal beats any cheap accepted one, which beats no deal only by its partial credit
    assert min(total["won"]) > max(total["cheap"]) + 0.8
    assert total["cheap"][0] - total["idle"][0] == pytest.approx(0.2 * 0.3 - 0.02 * (
        cheap[0].agent_turns - idle[0].agent_turns))
    # the verifier alone (the old reward) paid the cheap deal 0.3 of a win's at most 1.0
    verifier_only = RewardWeights(success=0.0, verifier=1.0, turn_cost=0.0)
    assert _trl_sum(verifier_only, _rows(cheap)) == pytest.approx([0.3] * 3)


def test_reward_block_from_params() -> None:
    settings = AgentRLSettings.from_section({"reward": {"success": 2.0, "verifier": 0.0, "turn_cost": 0.1}})
    assert settings.reward.trl_weights == [2.0, 0.0, -0.1]
    assert AgentRLSettings.from_section({}).reward == RewardWeights()
    with pytest.raises(ValueError, match=r"agent_rl.reward.bonus: unknown key"):
        AgentRLSettings.from_section({"reward": {"bonus": 1.0}})
    with pytest.raises(ValueError, match="must be >= 0"):
        RewardWeights(turn_cost=-0.1)
    with pytest.raises(ValueError, match="nothing would be rewarded"):
        RewardWeights(success=0.0, verifier=0.0)
    with pytest.raises(ValueError, match="unknown key"):
        AgentRLSettings.from_section({"turn_cost": 0.02})  # moved into `reward:`
    with pytest.raises(ValueError, match="set by the stage itself"):
        AgentRLSettings.from_section({"reward_weights": [1.0, 1.0, 1.0]})
