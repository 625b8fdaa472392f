"""The template reasoning backend: deterministic, varied, grounded in the context, never an echo."""

from __future__ import annotations

from pathlib import Path

import pytest

from mimesis_rl.behavior.reasoning import TemplateRationalizer, iter_contexts, phrases, repetition_problem
from mimesis_rl.behavior.reasoning.metrics import trace_metrics
from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.data.schema import PATTERN_NAMES, Conversation

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reasoning" / "conversations.jsonl"


@pytest.fixture(scope="module")
def conversations() -> list[Conversation]:
    return read_conversations(FIXTURE)


def by_id(conversations: list[Conversation], cid: str) -> Conversation:
    return next(c for c in conversations if c.conversation_id == cid)


def traces(conversation: Conversation) -> list[str]:
    return [t.reasoning or "" for t in conversation.turns if t.role == "user"]


def make(cid: str, turns: list[dict], goal: dict | None = None, persona: dict | None = None) -> Conversation:
    return Conversation.model_validate({"conversation_id": cid, "source": "test", "domain": "test",
                                        "goal": goal, "persona": persona, "turns": turns})


def test_every_user_turn_gets_a_trace_that_does_not_repeat_the_message(conversations):
    out = TemplateRationalizer(seed=0).rationalize(conversations)
    assert [c.conversation_id for c in out] == [c.conversation_id for c in conversations]
    for before, after in zip(conversations, out, strict=True):
        for old, new in zip(before.turns, after.turns, strict=True):
            assert old.model_dump(exclude={"reasoning"}) == new.model_dump(exclude={"reasoning"})
            if new.role == "user":
                assert new.reasoning and new.reasoning.strip()
                assert repetition_problem(new.reasoning, new.content) is None, (after.conversation_id, new)
            else:
                assert new.reasoning is None


def test_same_seed_same_traces_other_seed_other_traces(conversations):
    first = TemplateRationalizer(seed=7).rationalize(conversations)
    again = TemplateRationalizer(seed=7).rationalize(conversations)
    other = TemplateRationalizer(seed=8).rationalize(conversations)
    assert [traces(c) for c in first] == [traces(c) for c in again]
    assert [traces(c) for c in first] != [traces(c) for c in other]


def test_trace_depends_on_conversation_id_and_turn_not_on_batch(conversations):
    whole = TemplateRationalizer(seed=1).rationalize(conversations)
    one = TemplateRationalizer(seed=1).rationalize([conversations[2]])
    assert traces(whole[2]) == traces(one[0])


def test_phrasing_varies_across_conversations_with_the_same_pattern():
    turns = [{"role": "assistant", "content": "Here is the plan I made for you."},
             {"role": "user", "content": "That won't work.", "patterns": ["refusal"]}]
    convs = [make(f"c{i}", turns) for i in range(60)]
    out = [traces(c)[0] for c in TemplateRationalizer(seed=0).rationalize(convs)]
    refusal_sentences = {s for s in phrases.PATTERNS["refusal"] if any(s in t for t in out)}
    assert len(refusal_sentences) >= 5
    assert len(set(out)) >= 20  # 5 openers x 6 refusals, 60 draws


def test_every_pattern_has_several_phrasings_and_is_used():
    for name in PATTERN_NAMES:
        bank = phrases.EMOTIONS if name == "emotional_expression" else {name: phrases.PATTERNS[name]}
        assert sum(len(v) for v in bank.values()) >= 4, name
    for name in PATTERN_NAMES:
        conv = make(f"p-{name}", [{"role": "assistant", "content": "What would you like?"},
                                  {"role": "user", "content": "Hm, let me see.", "patterns": [name]}])
        trace = traces(TemplateRationalizer(seed=0).rationalize([conv])[0])[0]
        candidates = [p.split("{")[0] for bank in (phrases.PATTERNS.get(name, ()), *phrases.EMOTIONS.values())
                      for p in bank]
        assert any(c and c.lower() in trace.lower() for c in candidates), (name, trace)


def test_fixture_traces_are_diverse(conversations):
    metrics = trace_metrics(TemplateRationalizer(seed=0).rationalize(conversations))
    assert metrics["share_with_reasoning"] == 1.0
    assert metrics["distinct_traces"] == metrics["user_turns"]
    assert metrics["distinct_trigram_ratio"] > 0.7
    assert metrics["mean_overlap_with_message"] < 0.3


def test_opening_turn_without_previous_agent_turn():
    conv = make("open", [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "Hello!"}])
    ctx = next(iter_contexts(conv))
    assert ctx.last_agent is None and ctx.user_turn_number == 0
    trace = traces(TemplateRationalizer(seed=0).rationalize([conv])[0])[0]
    assert any(s in trace for s in phrases.SITUATIONS["opening"]), trace


def test_answering_a_question_quotes_it(conversations):
    conv = make("q", [{"role": "assistant", "content": "Welcome! Which city are you flying to?"},
                      {"role": "user", "content": "Rome, next Friday."}])
    trace = traces(TemplateRationalizer(seed=0).rationalize([conv])[0])[0]
    assert "Which city are you flying to" in trace


def test_offer_is_not_treated_as_a_question():
    offer = "How about I give you 2 water and you give me 1 food?"
    conv = make("offer", [{"role": "assistant", "content": offer},
                          {"role": "user", "content": "Nope, not enough.", "patterns": ["refusal"]}])
    ctx = next(iter_contexts(conv))
    assert ctx.agent_offered and ctx.agent_question is None
    asked = "I love hiking. How about you? What would you like?"
    asking = make("ask", [{"role": "assistant", "content": asked}, {"role": "user", "content": "Same."}])
    ctx = next(iter_contexts(asking))
    assert not ctx.agent_offered and ctx.agent_question == "What would you like?"
    out = [traces(TemplateRationalizer(seed=s).rationalize([conv])[0])[0] for s in range(12)]
    assert any(any(o in t for o in phrases.SITUATIONS["offer"]) for t in out)
    assert not any("How about I give you" in t for t in out)


def test_leaving_and_deal_actions(conversations):
    chat = TemplateRationalizer(seed=0).rationalize([by_id(conversations, "chitchat-fx-2-a")])[0]
    assert any(s in traces(chat)[-1] for s in phrases.SITUATIONS["leaving"])
    casino = TemplateRationalizer(seed=0).rationalize([by_id(conversations, "casino-fx-1-a")])[0]
    assert "accepting their deal" in traces(casino)[-1]


def test_casino_reasons_are_woven_in_with_their_rank(conversations):
    casino = by_id(conversations, "casino-fx-1-a")
    seen_high = seen_low = 0
    for seed in range(20):
        out = traces(TemplateRationalizer(seed=seed).rationalize([casino])[0])
        # turn 2 mentions firewood (the High priority): its written reason appears
        assert "dry firewood is scarce" in out[1]
        seen_high += any(s.split("{")[0] in out[1] for s in phrases.GOAL["reason_high"])
        # turn 3 talks about water and food: never frames a reason as "matters most" for Water
        assert "Water matters most" not in out[2] and "need water because" not in out[2]
        seen_low += "clean lake" in out[2]
    assert seen_high >= 10


def test_reasons_as_mapping_and_list_are_used(conversations):
    out = traces(TemplateRationalizer(seed=0).rationalize([by_id(conversations, "reasons-fx-6")])[0])
    assert any("my car broke down" in t for t in out)


def test_goal_slots_mentioned_and_private_slots_withheld(conversations):
    hotel = by_id(conversations, "hotel-fx-3")
    mentions_city = withheld_budget = slipped_budget = 0
    for seed in range(10):
        out = traces(TemplateRationalizer(seed=seed).rationalize([hotel])[0])
        mentions_city += "Lisbon" in out[0] or "lisbon" in out[0]
        # turn 2 withholds the budget the agent asked for; the private slot is named as kept back
        withheld_budget += "budget" in out[1]
        # the last turn discloses the private budget (120): the trace notes the slip
        slipped_budget += "budget" in out[4]
    assert mentions_city >= 5
    assert withheld_budget >= 8
    assert slipped_budget >= 5


def test_messages_that_copy_template_sentences_still_get_a_different_trace(conversations):
    echo = by_id(conversations, "echo-fx-4")
    for seed in range(10):
        out = TemplateRationalizer(seed=seed).rationalize([echo])[0]
        for turn in out.turns:
            if turn.role == "user":
                assert repetition_problem(turn.reasoning, turn.content) is None


def test_existing_valid_trace_kept_and_echo_replaced(conversations):
    rationalizer = TemplateRationalizer(seed=0)
    out = rationalizer.rationalize([by_id(conversations, "existing-fx-5")])[0]
    assert traces(out)[0] == "I finished my last novel yesterday and want something new for the train."
    assert traces(out)[1] != "Mostly sci-fi."
    assert rationalizer.stats.kept == 1 and rationalizer.stats.written == 1
    fresh = TemplateRationalizer(seed=0, keep_existing=False)
    fresh.rationalize([by_id(conversations, "existing-fx-5")])
    assert fresh.stats.kept == 0 and fresh.stats.written == 2


def test_real_casino_dialogues(casino_dir):
    from mimesis_rl.data.adapters import get_adapter

    items = get_adapter("casino").read(casino_dir / "casino_valid.json")
    convs = [c for c in items if isinstance(c, Conversation)]
    out = TemplateRationalizer(seed=0).rationalize(convs)
    reasons_used = 0
    for conv in out:
        reasons = [v for k, v in conv.goal.slots.items() if k.startswith("reason_")]
        for turn in conv.turns:
            if turn.role == "user":
                assert repetition_problem(turn.reasoning, turn.content) is None
                reasons_used += any(r[:25].lower() in turn.reasoning.lower() for r in reasons if len(r) > 25)
    metrics = trace_metrics(out)
    assert metrics["share_with_reasoning"] == 1.0
    assert reasons_used >= 0.1 * metrics["user_turns"]
    assert metrics["distinct_trigram_ratio"] > 0.2
