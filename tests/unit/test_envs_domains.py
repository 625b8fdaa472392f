"""Each domain with written winning and losing dialogues (seed 1; the goals are pinned first)."""

from __future__ import annotations

import json

import pytest

from mimesis_rl.envs.protocols import EpisodeState, UserReply
from mimesis_rl.envs.registry import DOMAINS, make_env


def run(domain: str, script: list[str | UserReply], seed: int = 1) -> EpisodeState:
    """Play a written dialogue: user, agent, user, agent, … (strings or UserReply for the user)."""
    env = make_env(domain)
    state = env.reset(seed)
    for i, turn in enumerate(script):
        assert not state.done, f"episode ended before turn {i}: {state.end_reason}"
        if i % 2 == 0:
            reply = turn if isinstance(turn, UserReply) else UserReply(turn, reasoning="I say what I need.")
            env.user_turn(state, reply)
        else:
            env.step(state, str(turn))
    assert state.done, "the written dialogue should finish the episode"
    json.dumps(state.to_record())  # transcripts are JSON-ready
    return state


def test_goals_pinned_for_seed_1() -> None:
    """The written dialogues below rely on these goals; seeded generation must not drift."""
    slots = {name: make_env(name).reset(1).goal.slots for name in DOMAINS}
    assert slots["shopping"]["category"] == "jacket" and slots["shopping"]["budget"] == 112
    assert slots["bargain"]["reservation"] == 216
    assert slots["campsite"]["high"] == "water"
    assert (slots["travel"]["area"], slots["travel"]["people"], slots["travel"]["day"]) == (
        "south",
        2,
        "tuesday",
    )
    assert slots["support"]["cause"] == "wifi_interference"
    assert (slots["returns"]["order"], slots["returns"]["decision"]) == ("A2707", "refund")
    assert (slots["content"]["genre"], slots["content"]["mood"]) == ("comedy", "dark")
    assert slots["tutoring"]["misconception"] == "smaller_from_larger"


# -- shopping -------------------------------------------------------------------------------------


def test_shopping_win() -> None:
    state = run(
        "shopping",
        [
            "Hi, I need something warm to wear this winter.",
            "Which style do you like, and what's your budget?",
            "Something colorful. I can spend up to $112.",
            'The Holt colorful jacket. <action>{"type": "recommend", "item": "p44"}</action>',
        ],
    )
    assert state.end_reason == "final_action"
    assert state.verdict.success and state.verdict.reward == 1.0


def test_shopping_lose_over_budget() -> None:
    state = run(
        "shopping",
        [
            "Hi, I need something warm to wear this winter.",
            "Which style do you like?",
            "Something colorful.",
            '<action>{"type": "recommend", "item": "p45"}</action>',
        ],
    )
    assert not state.verdict.success
    assert state.verdict.scores["budget"] == 0.0 and state.verdict.scores["style"] == 1.0
    assert state.verdict.reward == pytest.approx(0.5)


# -- bargain --------------------------------------------------------------------------------------


def test_bargain_win() -> None:
    state = run(
        "bargain",
        [
            "Hi, is the espresso machine still available?",
            'It is. <action>{"type": "offer", "price": 250}</action>',
            "Too much. How about $150?",
            'Meet me in the middle. <action>{"type": "offer", "price": 205}</action>',
            "Deal at $205.",  # plain text: acceptance is read from the words
        ],
    )
    assert state.end_reason == "accepted" and state.accepted
    assert state.verdict.success
    assert state.verdict.scores["share"] == pytest.approx((205 - 174) / (216 - 174), abs=1e-3)


def test_bargain_lose_cheap_deal_and_floor_guard() -> None:
    env = make_env("bargain")
    state = env.reset(1)
    env.user_turn(state, UserReply("Hi, is the espresso machine still available?"))
    result = env.step(state, '<action>{"type": "offer", "price": 150}</action>')  # below the floor of 174
    assert result.to_user is None and not result.done
    assert "below your minimum" in result.feedback
    env.step(state, '<action>{"type": "offer", "price": 176}</action>')
    env.user_turn(state, UserReply("Sure, I'll take it.", meta={"accept": True}))
    assert state.done and state.accepted
    assert state.invalid_actions == 1 and state.penalty == pytest.approx(0.1)
    assert not state.verdict.success
    assert state.verdict.reward == pytest.approx(0.3 + 0.7 * (2 / 42) - 0.1, abs=1e-4)


def test_bargain_agent_offers_a_stated_budget_once_then_haggles() -> None:
    """A buyer who states a budget and turns that very offer down is haggled with, not offered the budget
    again every other turn (the scripted agent looped so against the evidence simulator; issue 27)."""
    from mimesis_rl.envs.domains.bargain import agent_policy
    from mimesis_rl.envs.protocols import Observation

    def offer(*turns: str) -> str:
        roles = ["user", "assistant"] * len(turns)
        messages = [{"role": "system", "content": "sell"}]
        messages += [{"role": r, "content": t} for r, t in zip(roles, turns, strict=False)]
        public = {"item": "kayak", "list_price": 370, "floor": 230}
        return agent_policy(Observation("b-0", "bargain", messages, public, turn=2, turns_left=6))

    first = offer("Hi, is the kayak available?", "What's your budget?", "My budget is $314.")
    assert '"price": 314' in first
    after = offer("Hi, is the kayak available?", "What's your budget?", "My budget is $314.", first,
                  "Hmm, how about $290?", 'I can do 298. <action>{"type": "offer", "price": 298}</action>',
                  "Good. What's the price?")
    assert '"price": 314' not in after and '"type": "offer"' in after


# -- campsite -------------------------------------------------------------------------------------


def test_campsite_win() -> None:
    state = run(
        "campsite",
        [
            "Hi neighbour! Shall we split the extra supplies?",
            "What matters most to you?",
            "Water matters most to us, there's no clean stream near our site. We don't need much firewood.",
            "You take most of the water. "
            '<action>{"type": "propose", "food": 0, "water": 1, "firewood": 3}</action>',
            "Deal, that works for us!",
        ],
    )
    assert state.end_reason == "accepted"
    assert state.verdict.scores["agent_points"] == 14 and state.verdict.scores["user_points"] == 22
    assert state.verdict.success


def test_campsite_lose_greedy_then_poor_deal() -> None:
    state = run(
        "campsite",
        [
            "Hi neighbour!",
            '<action>{"type": "propose", "food": 3, "water": 3, "firewood": 0}</action>',
            UserReply("No, that leaves us short.", meta={"accept": False}),
            '<action>{"type": "propose", "food": 0, "water": 0, "firewood": 3}</action>',
            "Deal!",
        ],
    )
    assert state.accepted and state.verdict.scores["agent_points"] == 9
    assert not state.verdict.success


def test_campsite_user_leaves_gives_walk_away_points() -> None:
    state = run("campsite", ["Hi.", "Hello!", UserReply("I'm out, bye.", ended=True)])
    assert state.end_reason == "user_left"
    assert state.verdict.reward == pytest.approx(5 / 36, abs=1e-4)


# -- travel ---------------------------------------------------------------------------------------


def test_travel_win_after_change_of_mind() -> None:
    state = run(
        "travel",
        [
            "Hi, I need somewhere to stay, in the south, cheap, for 2 people on tuesday.",
            'Lime Tree? <action>{"type": "book", "venue": "h30", "people": 2, "day": "tuesday"}</action>',
            UserReply("Actually, make it the east.", meta={"accept": False, "goal_update": {"area": "east"}}),
            'Ashley then. <action>{"type": "book", "venue": "h9", "people": 2, "day": "tuesday"}</action>',
            "Perfect, please book it.",
        ],
    )
    assert state.goal.slots["area"] == "east"
    assert state.hidden["original_goal"]["slots"]["area"] == "south"
    assert state.verdict.success


def test_travel_lose_wrong_people_and_illegal_goal_update() -> None:
    state = run(
        "travel",
        [
            "Hi, I need a cheap hotel in the south for tuesday.",
            '<action>{"type": "book", "venue": "h30", "people": 3, "day": "tuesday"}</action>',
            UserReply("No, it's for 2 people.", meta={"goal_update": {"area": "north"}}),
            "Sorry about that.",
            UserReply("Forget it.", ended=True),
        ],
    )
    assert state.goal.slots["area"] == "south"  # north is not a listed alternative
    assert any("ignored goal update" in t.content for t in state.trace if t.role == "environment")
    assert state.end_reason == "user_left" and not state.verdict.success


def test_travel_agent_reads_an_echo_of_its_booking_as_no_wish() -> None:
    """A learned user repeats the booking ("Ashley Hotel 9 in the east for 2, please?") before it
    decides; the scripted agent must not take the booking's own features for the user's wishes, or it
    rebooks the same wrong area forever. A correction that differs from the booking still counts."""
    from mimesis_rl.envs.domains.travel import BY_ID, booking_message, wishes
    from mimesis_rl.envs.protocols import Observation

    def observe(*turns: str) -> Observation:
        roles = ["user", "assistant"] * len(turns)
        messages = [{"role": "system", "content": "You book venues."}]
        messages += [{"role": r, "content": t} for r, t in zip(roles, turns, strict=False)]
        return Observation("e", "travel", messages, {"kind": "hotel"}, turn=len(turns), turns_left=3)

    booking = booking_message(BY_ID["h9"], 2, "tuesday")  # the east, cheap, free parking
    opening = "I need a cheap hotel for 2 people on tuesday."
    echo = "Ashley Hotel 9 in the east, cheap price, for 2 people on tuesday? Let me think."
    assert wishes(observe(opening, booking, echo)) == {"price": "cheap", "people": 2, "day": "tuesday"}
    correction = "No, it should be in the south, for 3 people."
    assert wishes(observe(opening, booking, correction)) == {
        "price": "cheap", "people": 3, "day": "tuesday", "area": "south"
    }


# -- support --------------------------------------------------------------------------------------


def test_support_win() -> None:
    state = run(
        "support",
        [
            "The Wi-Fi keeps dropping.",
            "Do other devices in your home have the same problem?",
            "My phone has the same problem.",
            "Does it work if you plug the laptop in with an ethernet cable?",
            "With the cable it works fine.",
            '<action>{"type": "resolve", "cause": "wifi_interference"}</action>',
        ],
    )
    assert state.verdict.success and state.verdict.reward == 1.0


def test_support_lose_wrong_cause() -> None:
    state = run("support", ["Internet's broken.", '<action>{"type": "resolve", "cause": "dns"}</action>'])
    assert not state.verdict.success and state.verdict.reward == 0.0


def test_support_agent_reads_a_bare_yes_or_no_to_the_check_it_asked() -> None:
    """People answer "Do other devices…?" with "No", or in their own words: the scripted agent takes it as
    that check's answer, and only when it asked that one check (two questions at once leave a bare "no"
    unread)."""
    from mimesis_rl.envs.domains.support import CHECKS, _answers
    from mimesis_rl.envs.protocols import Observation

    def obs(*turns: str) -> Observation:
        roles = ["user", "assistant"] * len(turns)
        messages = [{"role": "system", "content": "table"}]
        messages += [{"role": r, "content": t} for r, t in zip(roles, turns, strict=False)]
        return Observation("s-0", "support", messages, {}, turn=1, turns_left=4)

    devices, ethernet = CHECKS["other_devices"][0], CHECKS["ethernet"][0]
    assert _answers(obs("Internet's broken.", devices, "No")) == {"other_devices": False}
    assert _answers(obs("Internet's broken.", devices, "Yeah, my phone too.")) == {"other_devices": True}
    assert _answers(obs("Internet's broken.", f"{devices} {ethernet}", "No")) == {}
    assert _answers(obs("Internet's broken.", devices, "Hmm, I'd have to look.")) == {}
    # the check restated in other words than the scripted user's: its negation is the answer
    assert _answers(obs("Hi.", devices, "My other devices have the same problem.")) == {"other_devices": True}
    fine = "The other devices don't have any trouble."
    assert _answers(obs("Hi.", devices, fine)) == {"other_devices": False}
    assert _answers(obs("Hi.", devices, "Do other devices in my home have it too?")) == {}  # asked back
    assert _answers(obs("Hi.", devices, "It's been slow all week.")) == {}  # not about the check
    said = CHECKS["ethernet"][1]  # a statement names its own check, whatever was asked
    assert _answers(obs("Internet's broken.", devices, f"No. {said}")) == {"ethernet": True}


# -- returns --------------------------------------------------------------------------------------


def test_returns_win() -> None:
    state = run(
        "returns",
        [
            "Hi, I want to return something.",
            "Could you give me your order number, and the item's condition?",
            "The order number is A2707. It arrived damaged.",
            '<action>{"type": "resolve", "order": "A2707", "decision": "refund"}</action>',
        ],
    )
    assert state.verdict.success and state.verdict.reward == pytest.approx(1.0)


def test_returns_lose_wrong_decision() -> None:
    state = run(
        "returns",
        [
            "Hi, I want to return something.",
            "Order number?",
            "A2707.",
            'Final sale, sorry. <action>{"type": "resolve", "order": "A2707", "decision": "deny"}</action>',
        ],
    )
    assert not state.verdict.success
    assert state.verdict.scores == {"order": 1.0, "decision": 0.0, "task": 0.3, "penalty": 0.0}


def test_returns_agent_does_not_read_a_negated_condition_as_that_condition() -> None:
    """"It's not damaged" is no answer to "What condition…?": the scripted agent asks again instead of
    refunding a damaged item (it did, against the evidence simulator; issue 27)."""
    from mimesis_rl.envs.domains.returns import agent_policy
    from mimesis_rl.envs.protocols import Observation

    def reply(text: str) -> str:
        messages = [{"role": "system", "content": "orders"}, {"role": "user", "content": "Order A1975."},
                    {"role": "assistant", "content": "What condition is the item in?"},
                    {"role": "user", "content": text}]
        public = {"orders": [{"order": "A1975", "item": "smartwatch", "delivered_days_ago": 22,
                              "final_sale": True}]}
        return agent_policy(Observation("r-0", "returns", messages, public, turn=2, turns_left=4))

    assert "<action>" not in reply("It's not damaged.") and "condition" in reply("It's not damaged.")
    assert '"decision": "refund"' in reply("It arrived damaged, broken right out of the box.")
    assert '"decision": "deny"' in reply("I opened it and used it a couple of times.")


# -- content --------------------------------------------------------------------------------------


def test_content_win_after_a_seen_film() -> None:
    state = run(
        "content",
        [
            "Recommend me something to watch tonight.",
            "Which genre, and what mood?",
            "A comedy, something dark.",
            '<action>{"type": "recommend", "item": "m8"}</action>',
            "I've seen Winter Tide already.",
            '<action>{"type": "recommend", "item": "m5"}</action>',
            "Oh, Hidden Road sounds great, I'll watch that!",
        ],
    )
    assert state.verdict.success
    assert state.verdict.scores["declined"] == 1
    assert state.verdict.reward == pytest.approx(0.85)


def test_content_lose_never_accepted() -> None:
    env = make_env("content", max_turns=2)
    state = env.reset(1)
    env.user_turn(state, UserReply("Any good films?"))
    for film in ("m20", "m40"):
        env.step(state, f'<action>{{"type": "recommend", "item": "{film}"}}</action>')
        env.user_turn(state, UserReply("Nah, not that one.", meta={"accept": False}))
    assert state.done and state.end_reason == "turn_limit"
    assert not state.verdict.success and state.verdict.reward == 0.0


# -- tutoring -------------------------------------------------------------------------------------


def test_tutoring_win() -> None:
    state = run(
        "tutoring",
        [
            "I keep getting my arithmetic homework wrong.",
            "What is 52 - 27?",
            "I think it's 35.",
            '<action>{"type": "diagnose", "misconception": "smaller_from_larger"}</action>',
        ],
    )
    assert state.verdict.success


def test_tutoring_lose() -> None:
    state = run(
        "tutoring",
        [
            "I'm bad at maths.",
            '<action>{"type": "diagnose", "misconception": "left_to_right"}</action>',
        ],
    )
    assert not state.verdict.success and state.verdict.reward == 0.0


def test_tutoring_student_solves_with_misconception() -> None:
    from mimesis_rl.envs.domains.tutoring import PROBES, solve

    assert solve("What is 1/2 + 1/3?", "add_across") == "2/5"
    assert solve("What is 1/2 + 1/3?", None) == "5/6"
    assert solve("Which is larger, 0.25 or 0.5?", "longer_is_larger") == "0.25"
    assert solve("What is 8 divided by 0.5?", None) == "16"
    assert solve("What is 2 + 3 x 4?", "left_to_right") == "20"
    assert solve("Hello there", None) is None
    for mis, probe in PROBES.items():  # every probe exposes its misconception
        assert solve(probe, mis) != solve(probe, None), mis


def test_shopping_agent_recommends_something_when_no_item_has_the_stated_kind_and_style() -> None:
    """A user's words can name a category and style the shown catalogue lacks (the learned simulator
    did, and the scripted agent crashed on an empty pool): the agent falls back to the category."""
    from mimesis_rl.envs.domains.shopping import agent_policy
    from mimesis_rl.envs.protocols import Observation

    catalogue = [{"id": "p1", "name": "Trail Jacket", "category": "jacket", "style": "sporty", "price": 90,
                  "rating": 4.1},
                 {"id": "p2", "name": "Desk Lamp", "category": "lamp", "style": "classic", "price": 40,
                  "rating": 4.5}]
    messages = [{"role": "system", "content": "shop"},
                {"role": "user", "content": "I want a rugged jacket, my budget is $120."}]
    reply = agent_policy(Observation("s-0", "shopping", messages, {"catalogue": catalogue}, turn=1,
                                     turns_left=1))
    assert '"item": "p1"' in reply
