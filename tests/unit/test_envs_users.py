"""Scripted users: knobs do what they say, replies carry patterns and first-person reasoning, seeds
reproduce."""

from __future__ import annotations

import json

import pytest

from mimesis_rl.data.schema import PATTERN_NAMES
from mimesis_rl.envs.loop import play
from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent, scripted_user
from mimesis_rl.envs.scripted.knobs import PRESETS, Knobs, preset


def transcripts(domain: str, user: str, seeds: range = range(30)) -> list:  # noqa: ANN401
    return play(make_env(domain), scripted_agent(domain), scripted_user(domain, user), list(seeds))


def user_turns(states: list) -> list:  # noqa: ANN401
    return [t for s in states for t in s.trace if t.role == "user"]


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_replies_have_known_patterns_and_first_person_reasoning(domain: str) -> None:
    turns = user_turns(transcripts(domain, "chaotic"))
    assert turns
    for turn in turns:
        assert set(turn.patterns) <= set(PATTERN_NAMES)
        assert "unknown_patterns" not in turn.meta
        assert turn.reasoning and (
            "I " in turn.reasoning or "I'" in turn.reasoning or "my " in turn.reasoning
        )


def test_the_difficult_users_show_most_of_the_13_patterns() -> None:
    shown = {
        p for d in DOMAINS for p in (pat for t in user_turns(transcripts(d, "chaotic")) for pat in t.patterns)
    }
    shown |= {p for d in DOMAINS for t in user_turns(transcripts(d, "skeptic")) for p in t.patterns}
    assert len(shown) >= 12, sorted(set(PATTERN_NAMES) - shown)


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_same_seed_same_transcript(domain: str) -> None:
    first = [s.to_record() for s in transcripts(domain, "chaotic", range(5))]
    again = [s.to_record() for s in transcripts(domain, "chaotic", range(5))]
    assert json.dumps(first) == json.dumps(again)


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_seeded_goal_generation_is_reproducible_and_varied(domain: str) -> None:
    env = make_env(domain)
    goals = [env.reset(seed).goal.model_dump() for seed in range(20)]
    assert goals == [make_env(domain).reset(seed).goal.model_dump() for seed in range(20)]
    assert len({json.dumps(g, sort_keys=True) for g in goals}) >= 5
    for seed in range(3):
        assert env.reset(seed).system_prompt == make_env(domain).reset(seed).system_prompt


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_tell_all_discloses_everything_in_the_opening(domain: str) -> None:
    user = scripted_user(domain, "tell_all")
    env = make_env(domain)
    states = [env.reset(seed) for seed in range(5)]
    sessions = user.start([s.spec for s in states])
    for session, reply in zip(sessions, user.opening(sessions), strict=True):
        assert session.told == set(user.policy.facts(session)), domain
        assert "vague_request" not in reply.patterns and reply.message


def test_private_users_decline_private_facts() -> None:
    turns = user_turns(transcripts("shopping", "private"))
    assert any("privacy_concern" in t.patterns for t in turns)
    assert all(
        "privacy_concern" not in t.patterns for t in user_turns(transcripts("shopping", "cooperative"))
    )


def test_terse_users_write_fragments() -> None:
    turns = user_turns(transcripts("travel", "terse"))
    assert all("incomplete_utterance" in t.patterns for t in turns)
    assert not any(t.content.endswith(".") for t in turns)


def test_fickle_users_change_the_goal_the_verifier_uses() -> None:
    states = transcripts("travel", "fickle")
    changed = [s for s in states if s.hidden.get("goal_changes")]
    assert len(changed) >= 15
    for state in changed:
        last = {k: v for k, v in state.hidden["goal_changes"][-1].items() if k != "turn"}
        assert all(state.goal.slots[k] == v for k, v in last.items())  # may flip back to the original
        assert any("intent_change" in t.patterns for t in state.trace if t.role == "user")
    assert not any(s.hidden.get("goal_changes") for s in transcripts("travel", "cooperative"))


def test_impatient_users_leave() -> None:
    states = transcripts("support", "impatient")
    left = [s for s in states if s.end_reason == "user_left"]
    assert left and all(s.agent_turns >= PRESETS["impatient"].patience for s in left)


def test_empty_agent_message_gets_a_confused_user() -> None:
    user = scripted_user("content")
    sessions = user.start([make_env("content").reset(0).spec])
    user.opening(sessions)
    reply = user.respond(sessions, [""])[0]
    assert "follow_up_probe" in reply.patterns and reply.message


def test_user_refuses_a_session_of_another_domain() -> None:
    with pytest.raises(ValueError, match="plays domain 'shopping'"):
        scripted_user("shopping").start([make_env("bargain").reset(0).spec])


def test_knobs_are_validated() -> None:
    with pytest.raises(ValueError, match="cooperativeness"):
        Knobs(cooperativeness=1.5)
    with pytest.raises(ValueError, match="patience"):
        Knobs(patience=0)
    with pytest.raises(KeyError, match="unknown scripted-user preset 'nope'"):
        preset("nope")
    assert Knobs().with_(emotion=0.5).emotion == 0.5
