"""The Environment protocol: action grammar, bad agent input, termination, trace privacy, the play loop."""

from __future__ import annotations

import json

import pytest

from mimesis_rl.envs.actions import accept_from_text, action_tag, parse_message
from mimesis_rl.envs.loop import play, summarize
from mimesis_rl.envs.protocols import ActionSpec, AgentSide, Environment, Observation, UserReply, UserSide
from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent, scripted_user
from mimesis_rl.envs.task_env import ENV_PREFIX

SPECS = (
    ActionSpec("recommend", "final", {"item": "str"}),
    ActionSpec("offer", "propose", {"price": "number"}),
    ActionSpec("split", "propose", {"food": "int"}, optional=("food",)),
)


# -- parser ---------------------------------------------------------------------------------------


def test_parse_valid_action_and_text() -> None:
    parsed = parse_message(
        'Try this one. <action>{"type": "recommend", "item": "p17"}</action> Enjoy!', SPECS
    )
    assert parsed.error is None
    assert parsed.action.type == "recommend" and parsed.action.args == {"item": "p17"}
    assert parsed.action.kind == "final"
    assert parsed.text == "Try this one. Enjoy!"


def test_parse_plain_talk_has_no_action() -> None:
    parsed = parse_message("What's your budget?", SPECS)
    assert parsed.action is None and parsed.error is None and not parsed.invalid


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("", "empty message"),
        ("   ", "empty message"),
        (None, "empty message"),
        ('<action>{"type": "recommend", "item": "p1"}', "unclosed action tag"),
        ("<action>{bad json}</action>", "not valid JSON"),
        ("<action>[1, 2]</action>", "must be a JSON object"),
        ('<action>{"item": "p1"}</action>', 'has no "type"'),
        ('<action>{"type": "buy", "item": "p1"}</action>', "unknown action type 'buy'; allowed types: offer"),
        ('<action>{"type": "recommend"}</action>', "missing field(s) item"),
        ('<action>{"type": "recommend", "item": 17}</action>', "field 'item' must be str"),
        ('<action>{"type": "offer", "price": true}</action>', "field 'price' must be number"),
        ('<action>{"type": "recommend", "item": "p1", "why": "x"}</action>', "unknown field 'why'"),
        (
            '<action>{"type": "recommend", "item": "p1"}</action>'
            '<action>{"type": "recommend", "item": "p2"}</action>',
            "2 actions in one message",
        ),
    ],
)
def test_parse_invalid_actions_explain_themselves(message: str | None, expected: str) -> None:
    parsed = parse_message(message, SPECS)
    assert parsed.invalid and parsed.action is None
    assert expected in parsed.error


def test_parse_int_accepts_whole_floats_and_optional_fields() -> None:
    assert parse_message('<action>{"type": "split", "food": 2.0}</action>', SPECS).action.args == {"food": 2}
    assert parse_message('<action>{"type": "split"}</action>', SPECS).action.args == {}
    assert "must be int" in parse_message('<action>{"type": "split", "food": 2.5}</action>', SPECS).error


def test_action_tag_roundtrip() -> None:
    parsed = parse_message(action_tag("offer", price=12.5), SPECS)
    assert parsed.action.to_dict() == {"type": "offer", "price": 12.5}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Deal at $200.", True),
        ("Sounds good, I'll take it!", True),
        ("No deal, too expensive.", False),
        ("Nah, not for me.", False),
        ("Hmm, tell me more.", None),
        ("Oh, that's great!", True),  # the learned simulator's yes to a booking (issue 27)
        ("That's great, but it's too expensive.", False),
        ("Great question, let me think.", None),
        # the learned simulator's yeses in its own words (benchmarks.sim_env's dialogue decisions)
        ("That's good, I'll buy it.", True),
        ("Fantastic, we can grab it.", True),
        ("That's dark, so dark. I'll see it.", True),
        ("That's good, I'll keep at $117.", None),  # a counter in a yes's clothes stays unread
        ("Fair enough. I'll leave it at $539.", None),
    ],
)
def test_accept_from_text(text: str, expected: bool | None) -> None:
    assert accept_from_text(text) is expected


# -- environment: bad input never crashes ------------------------------------------------------------


def test_every_domain_satisfies_the_protocol() -> None:
    for name in DOMAINS:
        env = make_env(name)
        assert isinstance(env, Environment)
        assert isinstance(scripted_user(name), UserSide)
        assert isinstance(scripted_agent(name), AgentSide)
        state = env.reset(3)
        assert state.system_prompt and "<action>" in state.system_prompt
        assert state.goal.text and state.spec.domain == name


def test_invalid_action_costs_a_turn_and_a_penalty_with_feedback() -> None:
    env = make_env("shopping", max_turns=3)
    state = env.reset(0)
    env.user_turn(state, UserReply("I need a jacket.", reasoning="I want a warm jacket."))
    result = env.step(state, '<action>{"type": "recommend", "item": "p9999"}</action>')
    assert result.parsed.invalid and result.to_user is None and not result.done
    assert "unknown item 'p9999'" in result.feedback
    assert state.agent_turns == 1 and state.invalid_actions == 1 and state.penalty == pytest.approx(0.1)
    obs = env.observe(state)
    assert obs.messages[-1]["role"] == "user" and obs.messages[-1]["content"].startswith(ENV_PREFIX)
    assert "unknown item" in obs.messages[-1]["content"] and obs.turns_left == 2


def test_penalties_keep_reward_in_unit_interval() -> None:
    env = make_env("support", max_turns=5, invalid_penalty=0.3)
    states = play(env, scripted_agent("support", "invalid"), scripted_user("support"), [0, 1])
    for state in states:
        assert state.end_reason == "turn_limit" and state.invalid_actions == 5
        assert state.verdict.reward == 0.0 and state.verdict.scores["penalty"] == pytest.approx(1.5)
        notes = [t for t in state.trace if t.role == "environment"]
        assert len(notes) == 5 and all("not valid JSON" in n.content for n in notes)


def test_agent_that_never_acts_hits_the_turn_limit() -> None:
    for name in DOMAINS:
        states = play(make_env(name), scripted_agent(name, "never_act"), scripted_user(name), [0, 1, 2])
        for state in states:
            assert state.done and state.end_reason == "turn_limit", name
            assert state.agent_turns == state.max_turns
            assert state.verdict is not None and not state.verdict.success
            assert 0.0 <= state.verdict.reward <= 1.0
            assert any("turn limit" in t.content for t in state.trace if t.role == "environment")


def test_empty_agent_messages_are_invalid_not_fatal() -> None:
    states = play(make_env("returns"), scripted_agent("returns", "silent"), scripted_user("returns"), [0])
    state = states[0]
    assert state.end_reason == "turn_limit" and state.invalid_actions == state.max_turns
    assert "empty message" in state.trace[1].meta["error"]


def test_empty_user_message_is_flagged_and_rendered() -> None:
    env = make_env("tutoring")
    state = env.reset(0)
    env.user_turn(state, UserReply("", reasoning="I don't feel like typing."))
    assert state.trace[0].meta["empty"] is True
    assert env.observe(state).messages[1]["content"] == "(the user sent an empty message)"


def test_user_leaving_at_once_ends_cleanly() -> None:
    class Leaver:
        name = "leaver"

        def start(self, specs):  # noqa: ANN001, ANN202
            return specs

        def opening(self, sessions):  # noqa: ANN001, ANN202
            return [
                UserReply("Never mind.", reasoning="I changed my mind about the whole thing.", ended=True)
                for _ in sessions
            ]

        def respond(self, sessions, messages):  # noqa: ANN001, ANN202
            raise AssertionError("a user who left is never asked again")

    for name in DOMAINS:
        states = play(make_env(name), scripted_agent(name), Leaver(), [0, 1])
        assert all(s.end_reason == "user_left" and s.agent_turns == 0 for s in states)
        assert all(s.verdict is not None and not s.verdict.success for s in states)


def test_user_side_returning_garbage_is_recorded_not_fatal() -> None:
    class Broken:
        name = "broken"

        def start(self, specs):  # noqa: ANN001, ANN202
            return specs

        def opening(self, sessions):  # noqa: ANN001, ANN202
            return [None for _ in sessions]

        def respond(self, sessions, messages):  # noqa: ANN001, ANN202
            return [UserReply("ok", ended=True) for _ in sessions]

    state = play(make_env("content"), scripted_agent("content"), Broken(), [0])[0]
    assert state.trace[0].meta["empty"] is True and "not a UserReply" in state.trace[0].meta["error"]
    assert state.done


def test_out_of_turn_calls() -> None:
    env = make_env("shopping")
    state = env.reset(0)
    result = env.step(state, "Hello?")  # the user speaks first
    assert result.parsed.invalid and "not the agent's turn" in result.feedback and state.agent_turns == 0
    env.user_turn(state, UserReply("Hi"))
    with pytest.raises(RuntimeError, match="out of turn"):
        env.user_turn(state, UserReply("Hi again"))


def test_constructor_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        make_env("shopping", max_turns=0)
    with pytest.raises(ValueError, match="invalid_penalty"):
        make_env("shopping", invalid_penalty=2.0)
    with pytest.raises(KeyError, match="unknown environment 'chess'"):
        make_env("chess")


# -- trace privacy, records, the loop ---------------------------------------------------------------


class Spy:
    """An agent that records every observation it gets (and then behaves like the scripted one)."""

    def __init__(self, domain: str) -> None:
        self.inner = scripted_agent(domain)
        self.name = "spy"
        self.seen: list[Observation] = []

    def act(self, observations: list[Observation]) -> list[str]:
        self.seen.extend(observations)
        return self.inner.act(observations)


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_user_reasoning_is_traced_but_never_shown_to_the_agent(domain: str) -> None:
    spy = Spy(domain)
    states = play(make_env(domain), spy, scripted_user(domain, "train_mix"), [0, 1, 2, 3])
    reasonings = [t.reasoning for s in states for t in s.trace if t.role == "user"]
    assert reasonings and all(reasonings)
    shown = json.dumps([o.messages for o in spy.seen]) + json.dumps([o.public for o in spy.seen])
    for text in reasonings:
        assert text not in shown
    goal_texts = {s.goal.text for s in states}
    assert not any(g in shown for g in goal_texts)
    for obs in spy.seen:  # chat-template ready: system, then alternating, ending on the user side
        roles = [m["role"] for m in obs.messages]
        assert roles[0] == "system" and roles[-1] == "user"
        assert all(a != b for a, b in zip(roles[1:], roles[2:], strict=False))


def test_play_batches_in_lockstep_and_drops_finished_dialogues() -> None:
    calls: list[int] = []
    agent = scripted_agent("support")
    original = agent.act

    def counting(observations: list[Observation]) -> list[str]:
        calls.append(len(observations))
        return original(observations)

    agent.act = counting  # type: ignore[method-assign]
    states = play(make_env("support"), agent, scripted_user("support", "withholding"), list(range(12)))
    assert calls[0] == 12 and calls == sorted(calls, reverse=True) and calls[-1] < 12
    assert [s.seed for s in states] == list(range(12))
    assert play(make_env("support"), agent, scripted_user("support"), []) == []


def test_agent_returning_wrong_count_is_a_clear_error() -> None:
    class Short:
        name = "short"

        def act(self, observations):  # noqa: ANN001, ANN202
            return []

    with pytest.raises(ValueError, match="returned 0 messages for 2 dialogues"):
        play(make_env("bargain"), Short(), scripted_user("bargain"), [0, 1])


def test_records_and_summary() -> None:
    states = play(make_env("campsite"), scripted_agent("campsite"), scripted_user("campsite"), range(10))
    record = json.loads(json.dumps(states[0].to_record(agent="a", user="u")))
    assert record["agent"] == "a" and record["verdict"]["reward"] == record["reward"]
    assert {t["role"] for t in record["turns"]} >= {"user", "assistant"}
    summary = summarize(states)
    assert summary["n"] == 10 and 0 <= summary["mean_reward"] <= 1
    assert sum(summary["end_reasons"].values()) == 10
    assert summarize([])["n"] == 0


def test_transcripts_convert_to_the_data_contract() -> None:
    from mimesis_rl.data.schema import Conversation

    states = play(make_env("shopping"), scripted_agent("shopping", "invalid"), scripted_user("shopping"), [0])
    conv = states[0].to_conversation()
    assert isinstance(conv, Conversation) and conv.goal == states[0].goal
    assert conv.turns[0].role == "user" and conv.turns[0].reasoning
    assert "not valid JSON" in conv.turns[1].meta["environment"][0]
    assert conv.outcome["end_reason"] == "turn_limit"
    silent = play(make_env("shopping"), scripted_agent("shopping", "silent"), scripted_user("shopping"), [0])[
        0
    ]
    assert silent.to_conversation().turns[1].meta["empty"] is True
    env = make_env("shopping")
    state = env.reset(0)
    env.user_turn(state, UserReply("bye", ended=True))
    with pytest.raises(ValueError, match="needs at least 2"):
        state.to_conversation()
