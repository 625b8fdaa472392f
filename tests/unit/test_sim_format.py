"""The simulator's turn format: rendering, role flipping, SFT examples and the tolerant parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.data.schema import PATTERN_NAMES, Conversation, GoalCard
from mimesis_rl.simulator.cards import BEHAVIOUR_GUIDANCE, system_card
from mimesis_rl.simulator.dialogue import turn_contexts
from mimesis_rl.simulator.format import END_MARKER, OPENING_CUE, parse_output, render_target
from mimesis_rl.simulator.sft_data import fit_windows, sft_example, sft_examples, sft_windows
from mimesis_rl.simulator.turn_stats import ParseStats


@pytest.fixture
def conversations(fixtures_dir: Path) -> list[Conversation]:
    return read_conversations(fixtures_dir / "sim" / "conversations.jsonl")


def test_guidance_covers_every_pattern() -> None:
    assert set(BEHAVIOUR_GUIDANCE) == set(PATTERN_NAMES)


def test_system_card_holds_goal_private_slots_and_behaviour() -> None:
    goal = GoalCard(text="Buy a jacket.", slots={"color": "green", "budget": 120}, private=["budget"])
    card = system_card("shopping", goal, {"age": "30s"}, ["privacy_concern", "negotiation"])
    assert "Buy a jacket." in card and "shopping" in card and "age: 30s" in card
    shared_line = next(line for line in card.splitlines() if line.startswith("What you know"))
    private_line = next(line for line in card.splitlines() if line.startswith("Private"))
    assert "color: green" in shared_line and "budget" not in shared_line
    assert "budget: 120" in private_line
    assert BEHAVIOUR_GUIDANCE["negotiation"] in card
    with pytest.raises(ValueError, match="unknown behaviour"):
        system_card("shopping", goal, None, ["being_nice"])


def test_support_card_states_what_the_user_sees_not_the_diagnosis() -> None:
    """Each check as the observation its user reports (copied, not inferred from `True`), no cause; the
    prompted baseline's card says the same facts."""
    from mimesis_rl.envs.domains.support import CHECKS
    from mimesis_rl.envs.registry import make_env
    from mimesis_rl.simulator.cards import prompted_card

    state = make_env("support").reset(3)
    checks, cause = state.goal.slots["checks"], state.goal.slots["cause"]
    for card in (system_card("support", state.goal), prompted_card("support", state.goal)):
        assert cause not in card and "True" not in card and "False" not in card
        for name, seen in checks.items():
            said = CHECKS[name][1] if seen else CHECKS[name][2]
            assert f"{name.replace('_', ' ')}: {said.rstrip('.')}" in card
    assert any(checks.values()) and not all(checks.values())  # both kinds of observation were shown
    corpus = GoalCard(text="My wifi keeps dropping.", slots={"router": "old", "cause": "unknown"})
    assert "router: old; cause: unknown" in system_card("support", corpus)  # not the environment's card


@pytest.mark.parametrize(("domain", "absent"), [
    ("travel", ("changeable", "True", "False")),
    ("content", ("changeable", "m1")),
    ("returns", ("decision", "final_sale")),
])
def test_task_cards_state_each_fact_in_the_users_words(domain: str, absent: tuple[str, ...]) -> None:
    """A fact the scripted agent asks about is on the card as the sentence its scripted user answers
    with, so the simulator can copy it; bookkeeping the user would not say is not on the card."""
    from mimesis_rl.envs.registry import make_env
    from mimesis_rl.simulator.cards import prompted_card

    module = __import__(f"mimesis_rl.envs.domains.{domain}", fromlist=["_"])
    for seed in range(6):
        goal = make_env(domain).reset(seed).goal
        if domain == "returns":
            phrases = {"condition": module.CONDITION_TEXT[goal.slots["condition"]]}
        elif domain == "content":
            phrases = {k: module.said(k, goal.slots) for k in ("genre", "mood")}
        else:
            kind = goal.slots["kind"]
            phrases = {k: module.said(k, goal.slots) for k in (*module.CONSTRAINTS[kind], "people", "day")}
        for card in (system_card(domain, goal), prompted_card(domain, goal)):
            facts = "\n".join(line for line in card.splitlines()
                               if line.startswith(("What you know", "Private", "Facts the user knows")))
            for slot, phrase in phrases.items():
                assert f"{slot}: {phrase.rstrip('.')}" in facts
            assert not any(word in facts for word in absent), facts
    corpus = GoalCard(text="Find me a film.", slots={"genre": "drama", "changeable": "maybe"})
    assert "changeable: maybe" in system_card(domain, corpus)  # a corpus card stays as it is


def test_roles_flipped_targets_carry_reasoning_and_end_marker(conversations: list[Conversation]) -> None:
    conv = conversations[0]  # user speaks first and ends the conversation
    messages = sft_examples([conv])[0]["messages"]
    assert [m["role"] for m in messages[:3]] == ["system", "user", "assistant"]
    assert messages[1]["content"] == OPENING_CUE
    simulator_turns = [m["content"] for m in messages if m["role"] == "assistant"]
    real_user_turns = conv.user_turns
    assert len(simulator_turns) == len(real_user_turns)
    for text, turn in zip(simulator_turns, real_user_turns, strict=True):
        assert text.startswith(f"<think>{turn.reasoning}</think>{turn.content}")
    assert simulator_turns[-1].endswith(END_MARKER)
    assert all(END_MARKER not in t for t in simulator_turns[:-1])
    agent_turns = [m["content"] for m in messages[2:] if m["role"] == "user"]
    assert agent_turns == [t.content for t in conv.turns if t.role == "assistant"]


def test_agent_first_conversation_and_trailing_agent_turns(conversations: list[Conversation]) -> None:
    conv = next(c for c in conversations if c.conversation_id == "camp-2")  # agent first, agent last
    messages = sft_examples([conv])[0]["messages"]
    assert messages[1] == {"role": "user", "content": conv.turns[0].content}
    assert messages[-1]["role"] == "assistant"  # the trailing agent turn has no target and is cut
    assert END_MARKER not in messages[-1]["content"]  # the agent spoke last: the user did not leave


def test_turn_contexts_give_prompt_up_to_each_user_turn(conversations: list[Conversation]) -> None:
    conv = conversations[0]
    contexts = list(turn_contexts(conv))
    assert len(contexts) == len(conv.user_turns)
    assert contexts[0].is_first and contexts[0].agent_message is None
    assert contexts[1].agent_message == conv.turns[1].content
    assert contexts[1].prompt[-1] == {"role": "user", "content": conv.turns[1].content}
    assert [c.ended for c in contexts] == [False, False, False, True]


@pytest.mark.parametrize("reasoning,message,ended", [
    ("I want it cheap.", "how much is it?", False),
    ("Done here.", "bye", True),
    ("", "hi", False),
])
def test_render_then_parse_round_trips(reasoning: str, message: str, ended: bool) -> None:
    parsed = parse_output(render_target(reasoning, message, ended))
    assert tuple(parsed) == (reasoning, message, ended)
    assert parsed.ok and parsed.repairs == ()


@pytest.mark.parametrize("raw,expected,repair", [
    ("I need water badly.</think>give me two waters", ("I need water badly.", "give me two waters", False),
     "missing_open_tag"),
    ("<think>a</think>hmm<think>b</think>fine, deal", ("a hmm b", "fine, deal", False),
     "merged_think_blocks"),
    ("just a message", ("", "just a message", False), "missing_think"),
    ("<think>x</think>bye [END_CONVERSATION] see you", ("x", "bye see you", True), "end_marker_moved"),
    ("<think>x</think>ok then<think>now I should", ("x", "ok then", False), "dropped_trailing_think"),
    ("<think>I do not want to say my budget here</think>I do not want to say my budget here. Any deals?",
     ("I do not want to say my budget here", "Any deals?", False), "removed_reasoning_from_message"),
])
def test_safe_repairs(raw: str, expected: tuple[str, str, bool], repair: str) -> None:
    parsed = parse_output(raw)
    assert parsed.ok, parsed.error
    assert repair in parsed.repairs
    assert tuple(parsed) == expected
    assert "<think>" not in parsed.message and "</think>" not in parsed.message


@pytest.mark.parametrize("raw,reason", [
    ("<think>still thinking about what to", "unclosed_think"),
    ("<think>thoughts</think>   ", "empty_message"),
    ("<think>thoughts</think>[END_CONVERSATION]", "empty_message"),
    ("hello <think>secret plan</think>there", "text_before_think"),
    ("<think>my budget is 120 dollars</think>my budget is 120 dollars", "reasoning_in_message"),
])
def test_unsafe_outputs_are_rejected_with_a_reason(raw: str, reason: str) -> None:
    parsed = parse_output(raw)
    assert not parsed.ok
    assert parsed.error == reason
    assert parsed.message == ""


def test_parse_stats_count_clean_repaired_and_rejected() -> None:
    stats = ParseStats()
    for raw in ["<think>a</think>b", "plain", "<think>unclosed", "<think>a</think>b"]:
        stats.parse(raw)
    metrics = stats.as_metrics()
    assert metrics["parse.total"] == 4
    assert metrics["parse.clean_rate"] == 0.5
    assert metrics["parse.rejected.unclosed_think"] == 1
    assert metrics["parse.repaired.missing_think"] == 1


def test_parse_stats_share_of_delivered_turns_closed_by_budget() -> None:
    from dataclasses import replace

    stats = ParseStats()
    clean = parse_output("<think>I want it.</think>Deal.")
    for repairs in [("closed_at_budget",), ("closed_mid_sentence",), (), ("missing_think",)]:
        stats.note_delivered(replace(clean, repairs=repairs))
    stats.note_delivered(parse_output("<think>unclosed"))  # not delivered: rejected
    metrics = stats.as_metrics()
    assert metrics["parse.delivered"] == 4
    assert metrics["parse.closed_at_budget_turn_rate"] == 0.5


def test_trim_messages_keeps_the_card_and_the_latest_exchange() -> None:
    from mimesis_rl.simulator.dialogue import trim_messages

    messages = [{"role": "system", "content": "card"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(7)]

    def count(ms: list[dict[str, str]]) -> int:
        return len(ms)

    trimmed = trim_messages(messages, count, 4)
    assert trimmed[0]["content"] == "card" and trimmed[-1]["content"] == "m6"
    assert len(trimmed) <= 4 and trimmed[1]["role"] == "user"  # still alternates after the card
    assert trim_messages(messages, count, 100) == messages


def test_sft_windows_cover_the_whole_conversation_and_its_end() -> None:
    from mimesis_rl.data.schema import Turn

    turns = []
    for i in range(10):
        turns += [Turn(role="user", content=f"u{i}", reasoning=f"why {i}"),
                  Turn(role="assistant", content=f"a{i}")]
    conv = Conversation(conversation_id="long", source="t", domain="chitchat", turns=turns[:-1])  # leaves
    windows = sft_windows(conv, window_turns=6)
    assert len(windows) > 1
    targets = [m["content"] for w in windows for m in w["messages"] if m["role"] == "assistant"]
    # every user turn is a target exactly once, in order; only the last one leaves
    assert [t.split("</think>")[1].replace(" [END_CONVERSATION]", "") for t in targets] == \
        [f"u{i}" for i in range(10)]
    assert targets[-1].endswith("[END_CONVERSATION]") and not any("[END" in t for t in targets[:-1])
    for w in windows:
        roles = [m["role"] for m in w["messages"]]
        assert roles[0] == "system" and roles[1] == "user" and roles[-1] == "assistant"
        assert all(a != b for a, b in zip(roles[1:], roles[2:], strict=False))  # alternating
    assert windows[0]["messages"][1]["content"] == OPENING_CUE
    assert windows[1]["messages"][1]["content"].startswith("a")  # the agent turn before the window
    assert sft_windows(conv, window_turns=None) == [sft_example(conv)]


def test_fit_windows_train_every_simulator_turn_within_the_limit() -> None:
    """The trainer cuts an example at its end, where the window's last simulator turn sits: a long
    window becomes windows under the same card that fit, each simulator turn trained exactly once."""
    card = {"role": "system", "content": "c" * 20}
    body = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{'x' * (5 + i)}{i}"}
            for i in range(10)]
    long_reply = [{"role": "user", "content": "ask"}, {"role": "assistant", "content": "y" * 80}]

    def count(ms: list[dict[str, str]]) -> int:
        return sum(len(m["content"]) for m in ms)

    limit = 50
    fitted = fit_windows([{"messages": [card, *body]}, {"messages": [card, *long_reply]}], count, limit)
    targets = [m["content"] for w in fitted for m in w["messages"] if m["role"] == "assistant"]
    assert targets == [m["content"] for m in body if m["role"] == "assistant"] + ["y" * 80]
    for window in fitted[:-1]:
        messages = window["messages"]
        roles = [m["role"] for m in messages]
        assert messages[0] == card and roles[1] == "user" and roles[-1] == "assistant"
        assert all(a != b for a, b in zip(roles[1:], roles[2:], strict=False))
        assert count(messages) <= limit or len(messages) == 3  # only a lone exchange may stay over
    assert fitted[-2]["messages"][-1] == body[-1]  # the last window still ends on the dialogue's end
    assert fitted[-1]["messages"] == [card, *long_reply]  # one exchange over the limit stays whole
    assert fit_windows([{"messages": [card, *body]}], count, 1000) == [{"messages": [card, *body]}]
    assert fit_windows([{"messages": [card, *body]}], count, None) == [{"messages": [card, *body]}]


def test_role_breaks_catch_the_card_said_back_and_narration_but_not_real_users() -> None:
    from mimesis_rl.simulator.cards import system_card
    from mimesis_rl.simulator.roleplay import role_break

    card = system_card("shopping", GoalCard(text="Buy a jacket.", slots={"budget": 90}, private=["budget"]))
    assert "end your message with" in card.lower()  # the phrase the leak below repeats
    assert role_break("When you're about to leave, end your message with .") == "echoes_card"
    assert role_break("You think privately inside yourself, not the one who wants anything.") == "echoes_card"
    assert role_break("The user has just finished their conversation.") == "narrates_user"
    assert role_break("You're a chat about chitchat. I'm the one who wants something.") == "echoes_card"
    # the leave instruction said back (demo environment samples, ended with the marker)
    assert role_break("When I want to leave, I will end it with You will do it.") == "echoes_card"
    assert role_break("Your message ended by .\nTo your last message I asked") == "echoes_card"
    # the opening cue taken as text (demo samples)
    assert role_break("I'll keep it short and focus on the message.\n\n[chat closed]") == "echoes_cue"
    assert role_break("Here is my first message: hi") == "echoes_cue"
    # Real users (demo corpus: 2 of 28,517 user turns match any role break, none of these two kinds)
    for real in ("I'd rather not say my budget.", "hmm, my user name is gone?", "ok I'll end it here, bye",
                 "I think privacy matters", "the user interface is confusing", "stay in touch!",
                 "I don't typically talk with people if they're gone when I open the chat.",
                 "I want something warm for the winter", "the chat is bugged again....",
                 "I want to end this with a bang"):
        assert role_break(real) is None, real
