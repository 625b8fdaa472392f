"""Agent evaluation: every domain in one batch, before/after compared dialogue by dialogue."""

from __future__ import annotations

from mimesis_rl.agent.evaluate import dialogue_outcomes, paired_gain
from mimesis_rl.envs.registry import make_env
from mimesis_rl.envs.specs import make_agent, make_user
from mimesis_rl.rollout import run_rollouts

SEEDS = list(range(6))


def _scores(agent_spec: str, domain: str = "bargain") -> dict:
    env = make_env(domain, max_turns=4)
    result = run_rollouts(env, make_agent(agent_spec, domain), make_user("scripted:cooperative", domain),
                          SEEDS, progress=False)
    return {domain: {"dialogues": dialogue_outcomes(SEEDS, result.states)}, "mean": {}}


def test_outcomes_follow_the_seeds_of_real_dialogues():
    played = _scores("scripted")
    outcomes = played["bargain"]["dialogues"]
    assert list(outcomes) == [str(s) for s in SEEDS]
    assert all(set(o) == {"reward", "success"} and 0.0 <= o["reward"] <= 1.0 for o in outcomes.values())
    assert sum(o["success"] for o in outcomes.values()) > 0  # the scripted agent closes deals


def test_paired_gain_sees_a_better_agent_and_no_gain_against_itself():
    never, good = _scores("scripted:never_act"), _scores("scripted")
    gain = paired_gain(never, good, "success", n_boot=500)
    assert gain["pairs"] == len(SEEDS)
    assert gain["diff"] > 0 and gain["ci"][0] <= gain["diff"] <= gain["ci"][1]
    same = paired_gain(good, good, "reward", n_boot=500)
    assert same["diff"] == 0.0 and same["verdict"] == "within noise"


def test_one_batch_over_domains_scores_like_one_run_per_domain():
    """`evaluate` plays every domain in one lockstep batch; per domain it must report what a run of
    that domain alone reports (scripted parties, so no model is needed)."""
    from mimesis_rl.agent.evaluate import evaluate
    from mimesis_rl.envs.loop import summarize
    from mimesis_rl.envs.multi import PerDomainAgent

    domains = ["bargain", "returns", "tutoring"]
    agent = PerDomainAgent({d: make_agent("scripted", d) for d in domains}, "scripted")
    users = {"coop": lambda d: make_user("scripted:cooperative", d)}
    batched = evaluate(agent, users, domains, SEEDS, max_turns=4, keep_dialogues=True)["coop"]
    for domain in domains:
        alone = run_rollouts(make_env(domain, max_turns=4), make_agent("scripted", domain),
                             make_user("scripted:cooperative", domain), SEEDS, progress=False)
        expected = summarize(alone.states)
        got = batched[domain]
        assert (got["n"], got["success_rate"], got["mean_reward"], got["end_reasons"]) == (
            expected["n"], expected["success_rate"], expected["mean_reward"], expected["end_reasons"])
        assert got["dialogues"] == dialogue_outcomes(SEEDS, alone.states)
    assert batched["mean"]["success_rate"] > 0.5
