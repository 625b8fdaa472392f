"""The scripted user's private reasoning of a decision names the card's value and the offer.

A 135M simulator learns from these turns (simulator/env_data.py); a reasoning that says only
"within what I'm willing to pay" gives it nothing to compare against. One test per decision kind.
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.envs.actions import action_tag, parse_message
from mimesis_rl.envs.domains.campsite import ITEMS, POINTS, complement, points, proposal_message
from mimesis_rl.envs.domains.content import FILMS
from mimesis_rl.envs.domains.travel import CONSTRAINTS, DAYS, VENUES, TravelEnv, booking_message, matches
from mimesis_rl.envs.protocols import UserReply
from mimesis_rl.envs.registry import make_env, scripted_user
from mimesis_rl.envs.scripted.knobs import Knobs

CALM = Knobs(toughness=0.0, emotion=0.0, disclosure=0.0, verbosity=0.6)


def _session(domain: str, knobs: Knobs = CALM, seed: int = 5) -> tuple[Any, Any, dict[str, Any]]:
    env, user = make_env(domain), scripted_user(domain, knobs=knobs, name="test")
    state = env.reset(seed)
    session = user.start([state.spec])[0]
    user.opening([session])
    return user, session, state


def _reply(user: Any, session: Any, message: str) -> UserReply:
    return user.respond([session], [message])[0]


def test_bargain_accept_names_offer_and_limit() -> None:
    user, session, state = _session("bargain")
    limit = state.goal.slots["reservation"]
    reply = _reply(user, session, f"I can do {limit}. " + action_tag("offer", price=limit))
    assert reply.meta["accept"] is True
    assert f"They offer ${limit}; I'd pay at most ${limit}" in reply.reasoning
    assert "within my limit: I'll take it" in reply.reasoning


def test_bargain_counter_over_limit_names_both_values() -> None:
    user, session, state = _session("bargain")
    limit = state.goal.slots["reservation"]
    price = limit + 60
    reply = _reply(user, session, f"I can do {price}. " + action_tag("offer", price=price))
    assert reply.meta["accept"] is False
    assert f"They offer ${price}; I'd pay at most ${limit}" in reply.reasoning
    assert f"${price} is over my ${limit} limit: I'll counter at $" in reply.reasoning
    counter = reply.reasoning.rsplit("$", 1)[1].rstrip(".")
    assert f"How about ${counter}?" in reply.message  # the reasoning names the counter it says


def test_bargain_haggling_within_limit_says_so() -> None:
    user, session, state = _session("bargain", CALM.with_(toughness=1.0))
    limit = state.goal.slots["reservation"]
    reply = _reply(user, session, f"I can do {limit - 1}. " + action_tag("offer", price=limit - 1))
    assert reply.meta["accept"] is False  # a tough buyer haggles below its maximum
    assert f"I'd pay at most ${limit}" in reply.reasoning
    assert "within my limit, but I can still get it cheaper" in reply.reasoning


def _campsite_offer(priorities: dict[str, str], accept: bool) -> tuple[dict[str, int], int]:
    """A split the calm user (threshold 19.5 on a first proposal: 21 - 1.5) accepts or turns down."""
    from mimesis_rl.envs.domains.campsite import SPLITS

    for keep in SPLITS:
        mine = points(complement(keep), priorities)
        if (mine >= 20) == accept and 15 <= mine <= 27:
            return keep, mine
    raise AssertionError("no split found")


def test_campsite_decisions_name_points_priorities_and_need() -> None:
    for accept in (True, False):
        user, session, state = _session("campsite")
        slots = state.goal.slots
        keep, mine = _campsite_offer(slots["priorities"], accept)
        reply = _reply(user, session, "Split? " + action_tag("propose", **keep))
        assert reply.meta["accept"] is accept
        share, level = complement(keep), slots["priorities"]
        theirs = ", ".join(f"{share[i]} {i} ({level[i]}, {share[i] * POINTS[level[i]]})" for i in ITEMS)
        assert f"They'd leave me {theirs}; that's {mine} points, and I need at least 20" in reply.reasoning
        assert ("I'll take it" if accept else "I'll counter") in reply.reasoning


def test_a_campsite_proposal_shows_the_share_the_users_reasoning_starts_from() -> None:
    """The user's share is in the message, in the order its reasoning states it, so a learned user
    copies it instead of subtracting the agent's share from 3 (which it did not learn)."""
    import re

    user, session, state = _session("campsite")
    keep = {"food": 0, "water": 3, "firewood": 1}
    message = proposal_message(keep)
    assert "and you take 3 food, 0 water, 2 firewood?" in message
    reply = _reply(user, session, message)
    counts = re.findall(r"(\d) (food|water|firewood)", reply.reasoning.split(";")[0])
    assert counts == re.findall(r"(\d) (food|water|firewood)", message.split("you take")[1])


def test_content_decisions_name_film_and_wish() -> None:
    user, session, state = _session("content")
    slots = state.goal.slots
    fit = next(f for f in FILMS if f["genre"] == slots["genre"] and f["mood"] == slots["mood"]
               and f["id"] not in slots["seen"])
    miss = next(f for f in FILMS if f["genre"] == slots["genre"] and f["mood"] != slots["mood"]
                and f["id"] not in slots["seen"])
    want = f"I want a {slots['mood']} {slots['genre']} I haven't seen"
    reply = _reply(user, session, "Try this. " + action_tag("recommend", item=miss["id"]))
    assert reply.meta["accept"] is False
    assert f"They suggest {miss['title']}, a {miss['mood']} {miss['genre']}; {want}" in reply.reasoning
    assert "doesn't fit" in reply.reasoning
    reply = _reply(user, session, "Try this. " + action_tag("recommend", item=fit["id"]))
    assert reply.meta["accept"] is True
    offer = f"They suggest {fit['title']}, a {fit['mood']} {fit['genre']}"
    assert f"{offer}; {want}, so it fits" in reply.reasoning


def test_content_seen_film_is_named() -> None:
    user, session, state = _session("content")
    seen = next(f for f in FILMS if f["id"] in state.goal.slots["seen"])
    reply = _reply(user, session, "Try this. " + action_tag("recommend", item=seen["id"]))
    assert reply.meta["accept"] is False
    assert f"They suggest {seen['title']}" in reply.reasoning and "already watched it" in reply.reasoning


def test_travel_decisions_name_booking_and_need() -> None:
    for right in (True, False):
        user, session, state = _session("travel")
        slots = state.goal.slots
        venue = next(v for v in state.public["venues"] if all(matches(v, slots).values()))
        day = slots["day"] if right else DAYS[(DAYS.index(slots["day"]) + 1) % len(DAYS)]
        reply = _reply(user, session, "Booked? " + action_tag("book", venue=venue["id"],
                                                              people=slots["people"], day=day))
        assert reply.meta["accept"] is right
        assert f"They offer {venue['name']}, a {slots['kind']} in the {venue['area']}" in reply.reasoning
        assert f", for {slots['people']} people on {day}" in reply.reasoning
        assert f"for {slots['people']} people on {slots['day']}" in reply.reasoning
        assert f"in the {slots['area']}, {slots['price']} price" in reply.reasoning
        assert ("so it matches" if right else "so the day is wrong") in reply.reasoning


def test_answer_names_the_slot_value() -> None:
    user, session, state = _session("bargain")
    reply = _reply(user, session, "What's your budget?")
    assert f"They asked about my budget (${state.goal.slots['reservation']}); that's fair" in reply.reasoning
    user, session, state = _session("returns")
    reply = _reply(user, session, "Could you give me your order number?")
    assert f"They asked about my order number ({state.goal.slots['order']})" in reply.reasoning


def test_declined_answers_still_name_the_value() -> None:
    user, session, state = _session("shopping", CALM.with_(privacy=1.0))
    reply = _reply(user, session, "What's your budget?")
    assert "privacy_concern" in reply.patterns
    budget = state.goal.slots["budget"]
    assert f"They asked about my budget (${budget}); I don't want to share" in reply.reasoning
    user, session, state = _session("content", CALM.with_(cooperativeness=0.0))
    reply = _reply(user, session, "Which genre do you like?")
    assert "withholding_info" in reply.patterns
    assert f"They asked about my genre ({state.goal.slots['genre']}); I can't be bothered" in reply.reasoning


def test_a_travel_booking_shows_every_feature_its_card_decides_by() -> None:
    """A user can only decide by what it is shown: each booking the scripted agent (or a decision item)
    makes names the venue's area, price and food or parking, and a hotel without free parking says so."""
    for venue in VENUES:
        message = booking_message(venue, 3, "friday")
        for key in CONSTRAINTS[venue["kind"]]:
            parking = "with free parking" if venue.get("parking") else "no free parking"
            shown = venue[key] if key != "parking" else parking
            assert shown in message, (venue["id"], key)
        assert parse_message(message, TravelEnv.actions).action.args == {"venue": venue["id"], "people": 3,
                                                                        "day": "friday"}
