"""Agent stage plumbing without models: BC transcripts, GRPO prompts, variant params, action stats."""

from __future__ import annotations

import pytest

from mimesis_rl.agent.data import action_span, clone_examples
from mimesis_rl.agent.evaluate import action_stats
from mimesis_rl.agent.rl_rollout import parse_prompt, prompt_rows
from mimesis_rl.agent.rl_settings import AgentRLSettings
from mimesis_rl.envs.loop import play
from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent, scripted_user


def test_clone_examples_are_winning_agent_views_in_every_domain():
    users = ["scripted:cooperative", "scripted:train_mix"]
    examples, report = clone_examples(None, users, per_domain=3, seed=1)
    assert {e["domain"] for e in examples} == set(DOMAINS)
    assert report.as_metrics()["kept_total"] == len(examples) == 3 * len(DOMAINS)
    for e in examples:
        roles = [m["role"] for m in e["messages"]]
        assert roles[0] == "system" and roles[-1] == "assistant"
        assert all(a != b for a, b in zip(roles[1:], roles[2:], strict=False))  # strictly alternating
        assert "<action>" in e["messages"][-1]["content"]  # a win ends on the agent's action
        assert all("reasoning" not in m for m in e["messages"])  # the agent never sees the user's reasoning
    # the kept episodes are wins when replayed
    first = examples[0]
    seed = int(first["episode_id"].rsplit("-", 1)[1])
    domain = first["domain"]
    (state,) = play(make_env(domain), scripted_agent(domain), scripted_user(domain, "cooperative"), [seed])
    assert state.verdict is not None and state.verdict.success


def test_clone_examples_per_domain_counts_and_the_final_action_span():
    examples, report = clone_examples(["bargain", "campsite", "tutoring"], ["scripted:cooperative"],
                                      per_domain={"campsite": 4, "bargain": 1}, seed=1)
    assert sorted(e["domain"] for e in examples) == ["bargain", *["campsite"] * 4]  # tutoring: none asked
    assert report.as_metrics()["kept_total"] == 5
    for e in examples:  # the final action, as the agent wrote it: the span the loss weighs
        last = e["messages"][-1]["content"]
        span = action_span(last)
        assert span and last.endswith(span) and span.lstrip().startswith("<action>")
        assert span.startswith(" ") == (last.index(span.lstrip()) > 0)  # its space, when text precedes
    assert action_span('Deal at $40? <action>{"type": "offer", "price": 40}</action> ok') == (
        ' <action>{"type": "offer", "price": 40}</action>')
    assert action_span("no action here") is None


def test_clone_examples_bad_input():
    with pytest.raises(ValueError, match="no training users"):
        clone_examples(["bargain"], [], per_domain=2)
    with pytest.raises(ValueError, match="per_domain"):
        clone_examples(["bargain"], ["scripted:cooperative"], per_domain=0)
    with pytest.raises(ValueError, match="per_domain"):
        clone_examples(["bargain"], ["scripted:cooperative"], per_domain={"campsite": 2})  # none in bargain
    with pytest.raises(ValueError, match="bad user spec"):
        clone_examples(["bargain"], ["cooperative"], per_domain=1)


def test_prompts():
    rows = prompt_rows(["bargain", "tutoring"], 2)
    assert [parse_prompt(r["prompt"]) for r in rows] == [
        ("bargain", 2_000_000), ("tutoring", 2_000_000), ("bargain", 2_000_001), ("tutoring", 2_000_001)]
    with pytest.raises(ValueError, match="expected '<domain> <episode seed>'"):
        parse_prompt([{"role": "user", "content": "bargain"}])


def test_settings_checks_and_variants():
    with pytest.raises(ValueError, match="multiple of num_generations"):
        AgentRLSettings.from_section(dict(batch_size=6, num_generations=4))
    with pytest.raises(ValueError, match="unknown key"):
        AgentRLSettings.from_section({"nope": 1})
    from mimesis_rl.config import load_params
    from tasks.agent_rl import variant_section

    params = load_params(None, "tiny")
    section, _, enabled = variant_section(params, "assistant")
    assert enabled and section["user"] == "prompted:assistant"
    assert section["output_dir"].endswith("/assistant") and "user_dep" not in section
    csd, _, enabled = variant_section(params, "mimesis_csd")
    assert csd["csd"]["enabled"] is True and csd["user"].startswith("learned:")
    with pytest.raises(ValueError, match="no variant 'x'"):
        variant_section(params, "x")


def test_action_stats():
    env = make_env("bargain")
    states = play(env, scripted_agent("bargain", "invalid"), scripted_user("bargain"), [0, 1])
    stats = action_stats(states)
    assert stats["valid_action_rate"] == 0.0 and stats["acted_rate"] == 0.0
    states = play(env, scripted_agent("bargain"), scripted_user("bargain"), [0, 1])
    assert action_stats(states)["valid_action_rate"] > 0.5
