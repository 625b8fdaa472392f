"""The decision rewards on real environment goal cards: a reply that decides like the card, and a
reply that answers what was asked, with hand-written replies; the prompts; the agreement rate."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from mimesis_rl.envs.protocols import UserReply
from mimesis_rl.envs.registry import DOMAINS
from mimesis_rl.eval.decisions import card_gap, decision_accuracy, dialogue_decisions
from mimesis_rl.simulator.decisions import (
    SEED_BASE,
    DecisionItem,
    card_user,
    decision_items,
    domain_items,
    episodes_for,
    replay,
)
from mimesis_rl.simulator.rewards import build_rewards
from mimesis_rl.simulator.rl_data import decision_rows, item_row
from mimesis_rl.simulator.verdicts import reasoned_decision

SEEDS = range(SEED_BASE, SEED_BASE + 3)
PROPOSING = ("bargain", "campsite", "travel", "content")


@pytest.fixture(scope="module")
def items() -> dict[str, list[DecisionItem]]:
    return {d: decision_items(d, SEEDS) for d in DOMAINS}


def _row(items: dict[str, list[DecisionItem]], domain: str, kind: str,
         slots: tuple[str, ...] | None = None) -> dict[str, Any]:
    item = next(i for i in items[domain] if i.kind == kind and (slots is None or i.asked_slots == slots))
    return item_row(item)


def _score(name: str, row: dict[str, Any], replies: list[str]) -> list[float | None]:
    """One reward on hand-written replies to one prompt row (completions as GRPO hands them over)."""
    from mimesis_rl.simulator.labeling import labeler_predictor

    funcs, _ = build_rewards({name: 1.0}, predictor=labeler_predictor("rules"), completion_prefix="<think>")
    columns = {k: [v] * len(replies) for k, v in row.items() if k != "prompt"}
    return funcs[0]([row["prompt"]] * len(replies), [f"I decide.</think>{r}" for r in replies], **columns)


def test_proposals_sit_at_within_and_beyond_the_cards_limit(items: dict[str, list[DecisionItem]]) -> None:
    for domain in PROPOSING:
        kinds = Counter((i.kind, i.expected_accept) for i in items[domain] if i.kind != "question")
        assert kinds[("within", True)] == len(SEEDS) and kinds[("beyond", False)] == len(SEEDS), domain
    for item in (i for i in items["bargain"] if i.kind != "question"):
        state, _ = replay("bargain", item.seed, item.agent_messages)
        price = state.actions[-1]["price"]
        limit = state.goal.slots["reservation"]
        assert {"at_limit": price == limit, "within": price < limit, "beyond": price > limit}[item.kind]
        assert state.accepted is item.expected_accept  # the environment took the card user's decision


def test_questions_cover_every_domain_with_answerable_slots(items: dict[str, list[DecisionItem]]) -> None:
    asked = {d: {s for i in items[d] if i.kind == "question" for s in i.asked_slots} for d in DOMAINS}
    assert asked["bargain"] == {"reservation"}
    assert asked["shopping"] == {"category", "style", "budget"}
    assert {"high", "low"} <= asked["campsite"] and {"genre", "mood"} <= asked["content"]
    assert asked["returns"] == {"item", "order", "condition"} and asked["tutoring"] == {"topic"}
    assert not items["support"]  # yes/no checks: no mention can show an answer


def test_decision_reward_pays_the_cards_decision_as_the_environment_reads_it(
        items: dict[str, list[DecisionItem]]) -> None:
    at_limit = _row(items, "bargain", "at_limit")
    assert at_limit["decision"] == "accept"
    limit = json.loads(at_limit["goal_slots"])["reservation"]
    assert _score("decision", at_limit, [f"Deal, ${limit} works for me.", "Hmm, that's too much for me.",
                                         "Let me think about it."]) == [1.0, 0.0, 0.0]
    beyond = _row(items, "bargain", "beyond")
    assert beyond["decision"] == "reject"
    assert _score("decision", beyond, ["No way, how about $100?", "Deal!", "Let me think about it."]) == [
        1.0, 0.0, 1.0]  # saying neither declines in the environment, so it agrees with turning down
    campsite = _row(items, "campsite", "beyond")
    assert _score("decision", campsite, ["No, that leaves us short.", "Sounds good, deal."]) == [1.0, 0.0]
    question = _row(items, "bargain", "question")
    assert _score("decision", question, ["Deal!"]) == [None]


def test_decision_reward_by_reasoning_reads_the_act_where_the_message_says_neither(
        items: dict[str, list[DecisionItem]]) -> None:
    """`sim_rl.decide_by_reasoning`: scored as a simulator played with `decide_by_reasoning` decides."""
    funcs, _ = build_rewards({"decision": 1.0}, completion_prefix="<think>", decide_by_reasoning=True)
    at_limit, beyond = _row(items, "bargain", "at_limit"), _row(items, "bargain", "beyond")
    replies = ["I'll take it: they offer the price I can pay.</think>Let me think about it.",
               "I'll counter at $100: they offer too much.</think>Let me think about it.",
               "I'll counter at $100: too much.</think>Deal!",  # a message that says yes keeps it
               "They offer it.</think>Let me think about it."]  # no verdict: neither declines

    def score(row: dict[str, Any]) -> list[float | None]:
        columns = {k: [v] * len(replies) for k, v in row.items() if k != "prompt"}
        return funcs[0]([row["prompt"]] * len(replies), replies, **columns)

    assert score(at_limit) == [1.0, 0.0, 1.0, 0.0]
    assert score(beyond) == [0.0, 1.0, 0.0, 1.0]


def test_outcomes_alone_leaves_the_decision_the_whole_reward_on_a_proposal(
        items: dict[str, list[DecisionItem]]) -> None:
    """`sim_rl.outcomes_alone`: style rewards say nothing where the card decides, and score the rest."""
    weights = {"decision": 1.0, "format": 0.5, "role_adherence": 1.0}
    gated, _ = build_rewards(weights, completion_prefix="<think>", outcomes_alone=True)
    plain, _ = build_rewards(weights, completion_prefix="<think>")
    beyond, question = _row(items, "bargain", "beyond"), _row(items, "bargain", "question")
    chat = {**beyond, "decision": "", "asked_slots": "[]"}  # the same prompt, asking for nothing
    replies = ["I'll counter: too much.</think>No way, how about $100?", "Fine.</think>Deal!"]

    def scores(funcs: list[Any], row: dict[str, Any]) -> list[list[float | None]]:
        columns = {k: [v] * len(replies) for k, v in row.items() if k != "prompt"}
        return [f([row["prompt"]] * len(replies), replies, **columns) for f in funcs]

    role, fmt, decision = scores(gated, beyond)  # build_rewards keeps REWARD_NAMES' order
    assert decision == [1.0, 0.0] and fmt == [None, None] and role == [None, None]
    assert None not in scores(plain, beyond)[1]  # off by default: the style rewards score it too
    assert scores(gated, chat)[:2] == scores(plain, chat)[:2]  # asking for nothing: every reward counts
    assert scores(gated, chat)[2] == [None, None]
    # answers is off, so a question keeps its style rewards (no row is left with no reward at all)
    assert scores(gated, question)[:2] == scores(plain, question)[:2]
    assert None not in scores(gated, question)[1]


def test_answers_reward_pays_stating_the_asked_slot_or_withholding_a_private_one_humanly(
        items: dict[str, list[DecisionItem]]) -> None:
    budget = _row(items, "bargain", "question", ("reservation",))
    limit = json.loads(budget["goal_slots"])["reservation"]
    replies = [f"My budget is ${limit}.", "I'd rather not say, that's personal.",
               "Nice guitar, what color is it?", "Not sure, does it matter?"]
    assert _score("answers", budget, replies) == [1.0, 1.0, 0.0, 0.0]  # dodging is no answer
    category = _row(items, "shopping", "question", ("category",))
    wanted = json.loads(category["goal_slots"])["category"]
    assert _score("answers", category, [f"A {wanted}, please.", "I'd rather not say, that's personal."]) == [
        1.0, 0.0]  # a public slot has no reason on the card to be withheld
    camp = _row(items, "campsite", "question", ("high", "low"))
    slots = json.loads(camp["goal_slots"])
    hint = f"Honestly, {slots['reasons'][slots['high']]}. We don't need much {slots['low']}."
    assert _score("answers", camp, [hint, f"We don't need much {slots['low']}."]) == [1.0, 0.0]
    assert _score("answers", _row(items, "bargain", "within"), ["Deal!"]) == [None]


def test_decision_prompts_replace_env_prompts_in_every_domain() -> None:
    rows = decision_rows(None, 2, seed=0, episodes_per_domain=2)
    by_domain = Counter(r["domain"] for r in rows)
    assert set(by_domain) == set(DOMAINS) - {"support"} and max(by_domain.values()) == 2
    assert Counter(r["decision"] for r in rows if r["decision"]) == {"accept": 2, "reject": 2}
    assert all(r["source"] == "decision" and r["prompt"][-1]["role"] == "user" for r in rows)
    assert {r["decision"] for r in rows} == {"accept", "reject", ""}
    assert all((r["decision"] == "") != (r["asked_slots"] == "[]") for r in rows)


def test_many_decision_prompts_are_as_many_as_asked_and_even() -> None:
    """24 a domain once gave 10 proposals and ~4 questions (4 episodes); the episodes grow with the ask."""
    rows = decision_rows(["bargain", "campsite"], 24, seed=0)
    assert Counter(r["domain"] for r in rows) == {"bargain": 24, "campsite": 24}
    decisions = Counter(r["decision"] for r in rows if r["decision"])
    assert min(decisions["accept"], decisions["reject"]) >= 12
    assert abs(decisions["accept"] - decisions["reject"]) <= 1


def test_episodes_grow_with_the_proposals_asked_for() -> None:
    """One rule for env_data, rl_data and the curve: half the proposals (rounded up), not under the floor."""
    assert [episodes_for(n) for n in (0, 2, 8, 9, 24, 48)] == [4, 4, 4, 5, 12, 24]
    assert episodes_for(2, floor=2) == 2 and episodes_for(7, floor=1) == 4


def test_decision_accuracy_of_the_card_user_and_a_contrarian() -> None:
    items = domain_items(PROPOSING, 6, seed=0, episodes_per_domain=3)
    card = decision_accuracy(card_user, items)
    assert card["decision_accuracy"] == 1.0 and card["unreached"] == 0 and card["decisions"] >= 8
    assert card["answer_rate"] == 1.0  # the card user states what it is asked, as the reward reads it

    class Contrarian:
        """The card user with every decision turned round."""

        name = "contrarian"

        def __init__(self, domain: str) -> None:
            self.user = card_user(domain)
            self.start, self.opening = self.user.start, self.user.opening

        def respond(self, sessions: list[Any], messages: list[str]) -> list[UserReply]:
            replies = self.user.respond(sessions, messages)
            return [UserReply(message="No deal." if r.meta["accept"] else "Deal!", meta={})
                    if "accept" in r.meta else r for r in replies]

    contrarian = decision_accuracy(Contrarian, items)
    assert contrarian["decision_accuracy"] == 0.0
    assert contrarian["answer_rate"] == card["answer_rate"]


def _users_say(message: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`records` with every user turn saying `message`, and no decision of its own in `meta`."""
    return [{**r, "turns": [{**t, "content": message, "meta": {}} if t["role"] == "user" else t
                            for t in r["turns"]]} for r in records]


def test_dialogue_decisions_read_whole_transcripts_against_the_card() -> None:
    from mimesis_rl.simulator.curve import env_dialogues

    records = [s.to_record(agent="scripted", user="card")
               for d in ("bargain", "campsite") for s in env_dialogues(card_user(d), 3, [d])]
    card = dialogue_decisions(records)
    assert card["proposals"] >= 6 and card["agreement"] == 1.0
    assert card["accepted_when_card_accepts"] == 1.0 and set(card["by_domain"]) == {"bargain", "campsite"}
    assert all(e["read"] == "accepted" for shown in card["examples"].values() for e in shown)
    own = card["reasoning"]["total"]  # the card user's own reasoning states its decision every time
    assert own.get("card_accepts:yes", 0) + own.get("card_declines:no", 0) == card["proposals"]

    # The same dialogues with every user turn a non-answer that sets no decision: the card's proposals
    # are still found (they are the agent's messages), and the replies are read as saying neither.
    mute = _users_say("Hmm, let me think about it.", records)
    silent = dialogue_decisions(mute)
    assert silent["proposals"] == card["proposals"]
    assert silent["accepted_when_card_accepts"] == 0.0 and silent["neither_when_card_accepts"] == 1.0
    assert silent["reasoning"] == card["reasoning"]  # the reasoning is read apart from the message
    # ... unless the simulator decided by its reasoning (`UserSimulator.decide_by_reasoning`): the
    # environment read the decision it recorded, and so does this count.
    reasoned = [{**r, "turns": [{**t, "meta": reasoned_decision(t["reasoning"], t["content"])}
                                if t["role"] == "user" else t for t in r["turns"]]} for r in mute]
    assert dialogue_decisions(reasoned)["by_domain"] == card["by_domain"]

    # Every user turn a yes, in dialogues where the agent also proposed what the card turns down (it
    # met a haggling user): the agreeable user accepts those too, which success alone would pay.
    from mimesis_rl.envs.loop import play
    from mimesis_rl.envs.registry import make_env, scripted_agent, scripted_user

    played = play(make_env("bargain"), scripted_agent("bargain"), scripted_user("bargain", "train_mix"),
                  [11, 12, 13])
    haggled = [s.to_record(agent="scripted", user="train_mix") for s in played]
    assert dialogue_decisions(haggled)["accepted_when_card_declines"] == 0.0
    agreeable = dialogue_decisions(_users_say("Deal, I accept.", haggled))
    assert agreeable["accepted_when_card_accepts"] == agreeable["accepted_when_card_declines"] == 1.0
    assert agreeable["card_gap"]["diff"] == 0.0  # the same yes on both sides of its card


def test_card_gap_reads_within_domains() -> None:
    """Yes to everything in bargain, no to everything in travel: pooled it reads as deciding by the
    card (most accepts in bargain, most declines in travel); within each domain it tells nothing apart."""
    by_domain = {"bargain": {"card_accepts:accepted": 9, "card_declines:accepted": 3},
                 "travel": {"card_accepts:declined": 3, "card_declines:declined": 9}}
    gap = card_gap(by_domain)
    assert gap["yes_where_accepts"] == [9, 12] and gap["yes_where_declines"] == [3, 12]
    assert gap["diff"] == 0.0 and gap["ci"] == [0.0, 0.0] and gap["strata"] == ["bargain", "travel"]
    deciding = card_gap({"bargain": {"card_accepts:yes": 6, "card_accepts:no": 2, "card_declines:no": 8}},
                        yes="yes")
    assert deciding["diff"] == 0.75 and deciding["ci"][0] > 0
    assert card_gap({"content": {"card_accepts:accepted": 4}})["diff"] is None  # one side only
