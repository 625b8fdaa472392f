"""Environment dialogues as simulator training data: training-role presets only, the scripted
user's reasoning on every user turn, the card the runtime renders, the original goal after a change
of mind, and GRPO contexts at later turns."""

from __future__ import annotations

import json

import pytest

from mimesis_rl.simulator.cards import system_card
from mimesis_rl.simulator.env_data import EnvDialogues, check_presets, env_windows, play_dialogues
from mimesis_rl.simulator.format import END_MARKER, OPENING_CUE, parse_output
from mimesis_rl.simulator.rl_data import env_rows


def test_only_training_role_presets_are_played() -> None:
    check_presets(["cooperative", "train_mix"])
    for unseen in ("terse", "fickle", "withholding", "tell_all"):
        with pytest.raises(ValueError, match="training-role presets"):
            check_presets([unseen])
    with pytest.raises(ValueError, match="unknown"):
        play_dialogues(EnvDialogues(domains=["nowhere"]))


def test_dialogues_carry_goal_card_reasoning_and_endings() -> None:
    settings = EnvDialogues(share=0.3, episodes_per_domain=3)
    convs = play_dialogues(settings, seed=5)
    assert convs == play_dialogues(settings, seed=5)  # seeded
    assert {c.domain for c in convs} == {"shopping", "bargain", "campsite", "travel", "support", "returns",
                                         "content", "tutoring"}
    assert {c.outcome["preset"] for c in convs} == {"cooperative", "train_mix"}
    for conv in convs:
        assert conv.goal is not None
        assert all(t.reasoning for t in conv.user_turns)  # the scripted user's private reasoning
    windows = env_windows(convs, max_behaviours=4, window_turns=6, seed=5)
    # only a user who walked out ends on the marker; the environment closes an accepted deal itself
    accepted = [c for c in convs if c.outcome["end_reason"] == "accepted"]
    assert accepted and all(c.turns[-1].role == "user" and not c.turns[-1].meta["ended"] for c in accepted)
    for conv in convs:
        ends = [w["messages"][-1]["content"].endswith(END_MARKER) for w in env_windows([conv], 4, 6, 5)]
        assert any(ends) == (conv.outcome["end_reason"] == "user_left"), conv.conversation_id
    plain_cards = {system_card(c.domain, c.goal, c.persona) for c in convs}
    plain = 0
    for w in windows:
        card = w["messages"][0]["content"]
        plain += card in plain_cards  # exactly the card `UserSimulator.card` gives a learned simulator
        assert "Your goal: " in card
        for m in w["messages"][1:]:
            if m["role"] == "assistant":
                turn = parse_output(m["content"])
                assert turn.ok and turn.reasoning and not turn.repairs
    assert 0 < plain < len(windows)
    assert any(w["messages"][1]["content"] == OPENING_CUE for w in windows)


def test_a_change_of_mind_keeps_the_original_card() -> None:
    convs = play_dialogues(EnvDialogues(presets=["train_mix"], domains=["shopping"], episodes_per_domain=40))
    changed = [c for c in convs if any("intent_change" in t.patterns for t in c.user_turns)]
    assert changed, "train_mix changes its mind now and then"
    for conv in changed:
        assert conv.goal.slots["style"] in conv.goal.slots["changeable"]["style"]
        said = " ".join(t.content for t in conv.user_turns)
        assert "changed my mind" in said.lower() or "doesn't work" in said.lower()


def test_grpo_environment_rows_reach_later_turns_with_what_was_revealed() -> None:
    rows = env_rows(["shopping", "bargain"], per_domain=6, seed=1, turns="all")
    assert {r["domain"] for r in rows} == {"shopping", "bargain"}
    assert any(r["user_turn_number"] > 0 and r["agent_message"] for r in rows)
    assert all(r["real_patterns"] is None and r["source"] == "env" for r in rows)
    later = [r for r in rows if r["user_turn_number"] > 0]
    assert any(json.loads(r["revealed"]) for r in later)
    openings = env_rows(["shopping"], per_domain=2, seed=1)
    assert all(r["user_turn_number"] == 0 and r["prompt"][1]["content"] == OPENING_CUE for r in openings)


def test_decision_turns_are_marked_and_decision_share_sets_the_windows_that_end_on_one() -> None:
    from mimesis_rl.simulator.decision_windows import decision_end_share, decision_turns

    convs = play_dialogues(EnvDialogues(share=0.3, episodes_per_domain=2), seed=3)
    kinds = {c.turns[i].meta["decision"] for c in convs for i in decision_turns(c)}
    assert kinds == {"proposal", "question"}
    for conv in convs:  # a proposal decision is the scripted user's reply to a pending offer
        for i in decision_turns(conv):
            if conv.turns[i].meta["decision"] == "proposal":
                assert "<action>" in conv.turns[i - 1].content
    plain = env_windows(convs, max_behaviours=4, window_turns=4, seed=3)
    assert 0.0 < decision_end_share(plain, convs) < 1.0
    for share in (0.25, 1.0):
        mixed = env_windows(convs, max_behaviours=4, window_turns=4, seed=3, decision_share=share)
        assert len(mixed) == len(plain)
        assert decision_end_share(mixed, convs) == pytest.approx(share, abs=1 / len(plain))
        for window in mixed:  # still a valid SFT window: card, agent side first, ends on the user side
            roles = [m["role"] for m in window["messages"]]
            assert roles[0] == "system" and roles[1] == "user" and roles[-1] == "assistant"
            assert len(roles) - 1 <= 4 + 1
    with pytest.raises(ValueError, match="decision_share"):
        EnvDialogues(decision_share=1.5)


def test_decision_items_add_boundary_dialogues_ending_on_the_card_users_reply() -> None:
    from mimesis_rl.envs.actions import accept_from_text
    from mimesis_rl.simulator.env_data import EnvDialogues, play_dialogues

    plain = play_dialogues(EnvDialogues(domains=["bargain"], presets=["cooperative"], episodes_per_domain=2))
    both = play_dialogues(EnvDialogues(domains=["bargain"], presets=["cooperative"], episodes_per_domain=2,
                                       decision_items=8))
    added = both[len(plain):]
    assert added and len({c.conversation_id for c in both}) == len(both)  # ids stay unique
    assert all(c.turns[-1].role == "user" for c in added)  # kept up to the reply it was played for
    answers = [accept_from_text(c.turns[-1].content) for c in added if c.turns[-2].content.count("offer")]
    assert True in answers and False in answers  # offers within the card's limit taken, beyond turned down


def test_decision_focus_trains_a_decision_item_on_its_last_exchange_alone() -> None:
    from mimesis_rl.simulator.env_data import EnvDialogues, env_windows, play_dialogues

    convs = play_dialogues(EnvDialogues(domains=["bargain"], presets=["cooperative"], episodes_per_domain=1,
                                        decision_items=4))
    items = [c for c in convs if c.outcome and c.outcome["preset"] == "card"]
    whole = env_windows(items, max_behaviours=4, window_turns=6, seed=0)
    focused = env_windows(items, max_behaviours=4, window_turns=6, seed=0, decision_focus=True)
    assert len(focused) == len(items) and any(len(w["messages"]) > 3 for w in whole)
    for window, conv in zip(focused, items, strict=True):
        roles = [m["role"] for m in window["messages"]]
        assert roles == ["system", "user", "assistant"]  # one target: the reply to the last agent turn
        assert conv.turns[-1].content in window["messages"][-1]["content"]
        assert window["messages"][1]["content"] == conv.turns[-2].content
    others = [c for c in convs if c not in items]
    assert env_windows(others, 4, 6, 0, decision_focus=True) == env_windows(others, 4, 6, 0)


def test_verdict_span_is_the_deciding_clause_through_the_reply_in_every_proposal_domain() -> None:
    from mimesis_rl.envs.actions import accept_from_text
    from mimesis_rl.simulator.decision_windows import PROPOSAL, verdict_span, with_verdict_spans
    from mimesis_rl.simulator.env_data import decision_dialogues, env_windows

    domains = ["bargain", "campsite", "travel", "content"]
    items = decision_dialogues(domains, 12, seed=0)
    windows = with_verdict_spans(env_windows(items, 4, 6, 0, decision_focus=True), items, "span", "reply")
    seen: dict[tuple[str, bool], int] = {}
    for conv, window in zip(items, windows, strict=True):
        target = window["messages"][-1]["content"]
        if conv.turns[-1].meta.get("decision") != PROPOSAL:
            assert window["span"] == ""  # questions are not weighted
            continue
        span = window["span"]
        assert span == verdict_span(target, "reply") and target.endswith(span) and span.startswith(" so ")
        accepted = bool(accept_from_text(conv.turns[-1].content))
        words = ("within", "enough", "matches", "fits") if accepted else ("over", "short", "wrong", "fit",
                                                                           "out")
        head = span.split(":")[0]
        assert any(w in head for w in words), (conv.domain, head)
        assert conv.turns[-1].content in span  # the delivered message is inside the weighted part
        clause = verdict_span(target, "clause")
        assert clause == head and span.startswith(clause) and ":" not in clause  # the clause alone
        seen[conv.domain, accepted] = seen.get((conv.domain, accepted), 0) + 1
    assert {d for d, _ in seen} == set(domains) and {a for _, a in seen} == {True, False}
    corpus = [{"messages": [{"role": "system", "content": "card"}, {"role": "user", "content": "hi"},
                            {"role": "assistant", "content": "<think>ok, so fine</think>hello"}]}]
    assert with_verdict_spans(corpus, items, "span")[0]["span"] == ""  # not a decision of these dialogues


def test_verdict_first_replies_open_on_the_act_their_message_carries_out() -> None:
    """`with_act_first`: every card user's reply to a proposal, in the four proposal domains, reasons
    act first; the `act` span is that act, it decides as the message does, and the facts and any
    later thought are all still there."""
    from mimesis_rl.envs.actions import accept_from_text
    from mimesis_rl.simulator.decision_windows import (
        PROPOSAL,
        verdict_span,
        with_act_first,
        with_verdict_spans,
    )
    from mimesis_rl.simulator.env_data import decision_dialogues, env_windows
    from mimesis_rl.simulator.verdicts import own_verdict

    domains = ["bargain", "campsite", "travel", "content"]
    items = decision_dialogues(domains, 12, seed=0)
    turned = with_act_first(items)
    windows = with_verdict_spans(env_windows(turned, 4, 6, 0, decision_focus=True), turned, "span", "act")
    seen: set[tuple[str, bool]] = set()
    for before, conv, window in zip(items, turned, windows, strict=True):
        old, new = before.turns[-1], conv.turns[-1]
        if new.meta.get("decision") != PROPOSAL:
            assert new == old and window["span"] == ""  # only replies to a proposal change
            continue
        act = window["span"]
        assert act == verdict_span(window["messages"][-1]["content"], "act") and act.startswith("I'll ")
        accepted = accept_from_text(new.content) is True
        assert own_verdict(new.reasoning) is accepted is own_verdict(old.reasoning)
        assert new.reasoning.startswith(act + ": they") and act in old.reasoning
        assert sorted(new.reasoning.lower().replace(":", "").replace(".", "").split()) == sorted(
            old.reasoning.lower().replace(":", "").replace(".", "").split())  # the same words, reordered
        seen.add((conv.domain, accepted))
    assert {d for d, _ in seen} == set(domains) and {a for _, a in seen} == {True, False}
    facts_first = "<think>They offer $5, so $5 is within my limit: I'll take it.</think>Deal."
    assert verdict_span(facts_first, "act") is None


def test_env_settings_refuse_a_verdict_weight_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="verdict_weight"):
        EnvDialogues(verdict_weight=0)
    with pytest.raises(ValueError, match="verdict_span"):
        EnvDialogues(verdict_span="message")
    with pytest.raises(ValueError, match="verdict_first"):
        EnvDialogues(verdict_span="act")


def test_a_decision_item_never_leaves() -> None:
    """Items are dialogues cut at the reply they were played for; the cut is not a leaving, or every
    counter-offer and answer would be trained to end the conversation, and neither is an accepted deal
    (the environment closes it): no decision teaches the end marker."""
    from mimesis_rl.envs.actions import accept_from_text
    from mimesis_rl.simulator.dialogue import user_left
    from mimesis_rl.simulator.env_data import decision_dialogues

    items = decision_dialogues(["bargain", "travel"], 16, seed=0)
    for conv in items:
        windows = env_windows([conv], 4, 6, 0, decision_focus=True)
        assert not user_left(conv, len(conv.turns) - 1)
        assert not windows[-1]["messages"][-1]["content"].endswith(END_MARKER)
    assert any(c.turns[-1].meta["decision"] == "question" for c in items)
    assert any(accept_from_text(c.turns[-1].content) is True for c in items)  # accepted deals among them


def test_a_decision_does_not_write_the_card_it_is_trained_under() -> None:
    """A reply to a proposal refuses because its card says so; were its refusal named in the card's
    behaviour line, the line would give the decision away (it did: 43 of 43 held-out items)."""
    from mimesis_rl.simulator.cards import conversation_card
    from mimesis_rl.simulator.decision_windows import PROPOSAL
    from mimesis_rl.simulator.env_data import decision_dialogues

    items = decision_dialogues(["bargain", "campsite", "travel", "content"], 12, seed=0)
    declined = [c for c in items if c.turns[-1].meta.get("decision") == PROPOSAL
                and "refusal" in c.turns[-1].patterns]
    assert declined
    for conv in items:
        last = conv.turns[-1]
        mute = conv.model_copy(update={"turns": [*conv.turns[:-1], last.model_copy(update={"patterns": []})]})
        if last.meta.get("decision") == PROPOSAL:
            assert conversation_card(conv) == conversation_card(mute)
    # the corpus's cards still name every pattern its users showed
    unmarked = [t.model_copy(update={"meta": {}}) for t in declined[0].turns]
    corpus = declined[0].model_copy(update={"turns": unmarked})
    assert "turn down suggestions" in conversation_card(corpus)
