"""travel: book a hotel or a restaurant under constraints, for a user who may change their mind.

The agent sees the venue list; the user knows the constraints (area, price, parking or cuisine)
and the booking details (people, day). Bookings are proposals the user confirms, and a user who
changes their mind does it when a booking is put in front of them, as people do.
"""

from __future__ import annotations

import random
import re
from typing import Any

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.actions import action_tag, parse_message
from mimesis_rl.envs.protocols import Action, ActionSpec, EpisodeState, Observation, ParsedMessage, Verdict
from mimesis_rl.envs.scripted.agent import agent_texts, last_match, latest_of, times_asked, without_feedback
from mimesis_rl.envs.scripted.user import Say, UserPolicy, UserSession
from mimesis_rl.envs.task_env import Scenario, TaskEnv, action_specs

AREAS = ("north", "south", "east", "west", "centre")
PRICES = ("cheap", "moderate", "expensive")
FOODS = ("italian", "indian", "chinese", "french", "mexican", "thai")
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
HOTEL_NAMES = (
    "Acorn",
    "Bridge",
    "Lime Tree",
    "Harbour",
    "Cityroomz",
    "Gonville",
    "Alpha",
    "Ashley",
    "Warkworth",
    "Riverside",
)
RESTAURANT_NAMES = (
    "Golden Wok",
    "Curry Garden",
    "La Margherita",
    "Le Petit",
    "El Patio",
    "Bangkok City",
    "Saffron",
    "Nandos",
    "Pizza Hut",
    "Royal Spice",
)
CONSTRAINTS = {"hotel": ("area", "price", "parking"), "restaurant": ("food", "area", "price")}
CHANGEABLE = {"hotel": "area", "restaurant": "food"}


def build_venues() -> list[dict[str, Any]]:
    """The fixed town: 40 hotels (h1…) and 40 restaurants (r1…)."""
    rng = random.Random("travel-venues-v1")
    venues: list[dict[str, Any]] = []
    for n in range(40):
        venues.append(
            {
                "id": f"h{n + 1}",
                "kind": "hotel",
                "name": f"{rng.choice(HOTEL_NAMES)} Hotel {n + 1}",
                "area": rng.choice(AREAS),
                "price": rng.choice(PRICES),
                "parking": rng.random() < 0.5,
            }
        )
    for n in range(40):
        venues.append(
            {
                "id": f"r{n + 1}",
                "kind": "restaurant",
                "name": f"{rng.choice(RESTAURANT_NAMES)} {n + 1}",
                "food": rng.choice(FOODS),
                "area": rng.choice(AREAS),
                "price": rng.choice(PRICES),
            }
        )
    return venues


VENUES = build_venues()
BY_ID = {v["id"]: v for v in VENUES}


def matches(venue: dict[str, Any], slots: dict[str, Any]) -> dict[str, bool]:
    """Per-constraint check of a venue against the user's (current) goal."""
    out = {}
    for key in CONSTRAINTS[slots["kind"]]:
        if key == "parking":
            out[key] = venue["parking"] or not slots["parking"]
        else:
            out[key] = venue.get(key) == slots[key]
    return out


class TravelEnv(TaskEnv):
    name = "travel"
    description = "Book a hotel or restaurant under constraints; users may change their mind mid-way."
    max_turns = 6
    actions = action_specs(
        ActionSpec(
            "book",
            "propose",
            {"venue": "str", "people": "int", "day": "str"},
            doc="book a venue for a number of people on a weekday (the user confirms or declines)",
            example='<action>{"type": "book", "venue": "h12", "people": 2, "day": "friday"}</action>',
        ),
    )

    @classmethod
    def card_facts(cls, slots: dict[str, Any]) -> dict[str, Any]:
        """Each wish in the words the user says it ("parking: Parking doesn't matter", not `False`), so a
        simulator asked for it can copy its answer from the card, as the support card showed (issue 27);
        the possible change of mind is the goal text's, not a fact to state. A card without this
        environment's slots (a corpus conversation) stays as it is."""
        if slots.get("kind") not in CONSTRAINTS or not all(k in slots for k in CONSTRAINTS[slots["kind"]]):
            return dict(slots)
        facts: dict[str, Any] = {"kind": slots["kind"]}
        facts.update({k: said(k, slots).rstrip(".") for k in (*CONSTRAINTS[slots["kind"]], "people", "day")})
        return facts

    def sample(self, rng: random.Random) -> Scenario:
        kind = rng.choice(("hotel", "restaurant"))
        pool = [v for v in VENUES if v["kind"] == kind]
        while True:
            anchor = rng.choice(pool)
            slots: dict[str, Any] = {"kind": kind, "people": rng.randint(1, 6), "day": rng.choice(DAYS)}
            for key in CONSTRAINTS[kind]:
                slots[key] = anchor[key] if key != "parking" else (anchor["parking"] and rng.random() < 0.7)
            key = CHANGEABLE[kind]
            alts = [
                v[key]
                for v in pool
                if v[key] != slots[key] and all(matches(v, {**slots, key: v[key]}).values())
            ]
            if alts:
                break
        alt = rng.choice(sorted(set(alts)))
        slots["changeable"] = {key: sorted({slots[key], alt})}
        goal = GoalCard(
            text=(
                f"You want to book {_wants(slots)}, for {slots['people']} people on {slots['day']}. "
                f"You might change your mind about the {key} ({alt} instead of {slots[key]})."
            ),
            slots=slots,
        )
        return Scenario(goal=goal, public={"kind": kind, "venues": pool})

    def intro(self, scenario: Scenario) -> str:
        kind = scenario.public["kind"]
        keys = CONSTRAINTS[kind]
        lines = [
            f"You are a booking assistant for {kind}s in town. Find out what the customer wants "
            f"({', '.join(keys)}, number of people, day) and book a matching {kind}. The customer "
            f"confirms or declines each booking.",
            "",
            f"{kind.capitalize()}s:",
        ]
        for v in scenario.public["venues"]:
            attrs = " | ".join(
                ("parking" if v[k] else "no parking") if k == "parking" else str(v[k]) for k in keys
            )
            lines.append(f"{v['id']} | {v['name']} | {attrs}")
        return "\n".join(lines)

    def check_action(self, state: EpisodeState, action: Action) -> str | None:
        venue = BY_ID.get(action.args["venue"])
        if venue is None or venue["kind"] != state.public["kind"]:
            return f"unknown {state.public['kind']} {action.args['venue']!r}; use an id from the list"
        if not 1 <= action.args["people"] <= 12:
            return f"people must be between 1 and 12, got {action.args['people']}"
        if str(action.args["day"]).lower() not in DAYS:
            return f"day must be a weekday name ({', '.join(DAYS)}), got {action.args['day']!r}"
        return None

    def score(self, state: EpisodeState) -> Verdict:
        action, slots = state.final_action, state.goal.slots
        if action is None or not state.accepted:
            return Verdict(
                reward=0.0,
                success=False,
                scores={"venue": 0.0, "people": 0.0, "day": 0.0},
                notes="nothing booked",
            )
        venue_ok = all(matches(BY_ID[action.args["venue"]], slots).values())
        scores = {
            "venue": float(venue_ok),
            "people": float(action.args["people"] == slots["people"]),
            "day": float(str(action.args["day"]).lower() == slots["day"]),
        }
        return Verdict(reward=round(sum(scores.values()) / 3, 6), success=all(scores.values()), scores=scores)


def describe(kind: str, area: str, price: str, food: str | None = None, parking: bool | None = None,
             venue: bool = False) -> str:
    """A goal's wishes or a venue's features in one order ("a restaurant in the west, moderate price,
    thai food"), so a booking and the card it is checked against read feature by feature. A venue says
    when it has no free parking; a goal names parking only when it needs it."""
    text = f"a {kind} in the {area}, {price} price"
    if kind == "restaurant":
        return f"{text}, {food} food"
    if parking:
        return f"{text}, with free parking"
    return f"{text}, no free parking" if venue else text


def _wants(slots: dict[str, Any]) -> str:
    """The card's constraints in the user's words, for the goal card and a booking decision's reasoning."""
    return describe(slots["kind"], slots["area"], slots["price"], slots.get("food"), slots.get("parking"))


def venue_text(venue: dict[str, Any]) -> str:
    """A venue as a booking names it: its name and the features a user checks it by."""
    return f"{venue['name']}, " + describe(venue["kind"], venue["area"], venue["price"], venue.get("food"),
                                           venue.get("parking"), venue=True)


def booking_message(venue: dict[str, Any], people: int, day: str) -> str:
    """The scripted agent's booking. Why it names the venue's features: whether a booking fits the card
    turns on them, and a user (a learned simulator included) can only decide by what it is shown."""
    return (f"I can book {venue_text(venue)}, for {people} people on {day}. "
            + action_tag("book", venue=venue["id"], people=people, day=day))


PRICE_CUES = {
    "cheap": "I'm on a tight budget",
    "moderate": "something mid-range would be good",
    "expensive": "money is no object, I want something nice",
}


def said(slot: str, slots: dict[str, Any]) -> str:
    """How the user states one of their wishes (the scripted user's answer, the card's fact)."""
    v = slots[slot]
    if slot == "area":
        return f"It should be in the {v}."
    if slot == "price":
        return f"Something {v}."
    if slot == "parking":
        return "I need free parking." if v else "Parking doesn't matter."
    if slot == "food":
        return f"I'd like {v} food."
    if slot == "people":
        return f"It's for {v} {'person' if v == 1 else 'people'}."
    return f"On {v}, please."


class TravelUser(UserPolicy):
    domain = "travel"
    actions = TravelEnv.actions
    ask_patterns = {
        "area": r"\barea|where|part of town|location|neighbou?rhood",
        "price": r"price|budget|cheap|expensive|how much|range",
        "parking": r"parking|\bcar\b|drive",
        "food": r"food|cuisine|kind of restaurant|type of restaurant",
        "people": r"how many|people|guests|party size|group",
        "day": r"\bday\b|when|date",
    }

    def facts(self, s: UserSession) -> tuple[str, ...]:
        return (*CONSTRAINTS[s.slots["kind"]], "people", "day")

    def setup(self, s: UserSession) -> None:
        s.memory["implicit_price"] = s.chance(0.4)

    def vague_opening(self, s: UserSession) -> str:
        if s.slots["kind"] == "hotel":
            return s.rng.choice(["Hi, I need somewhere to stay.", "Hello, I'm looking for a hotel."])
        return s.rng.choice(["Hi, I'm looking for a place to eat.", "Hello, can you find me a restaurant?"])

    def fact_text(self, s: UserSession, slot: str) -> str:
        if slot == "price" and s.memory.get("implicit_price"):
            return PRICE_CUES[s.slots[slot]] + "."
        return said(slot, s.slots)

    def tell(self, s: UserSession, say: Say, slot: str, *patterns: str) -> None:
        extra = ("implicit_preference",) if slot == "price" and s.memory.get("implicit_price") else ()
        super().tell(s, say, slot, *patterns, *extra)

    def change_text(self, s: UserSession, slot: str, old: Any, new: Any) -> str:
        text = self.fact_text(s, slot)
        return f"Actually, wait, I changed my mind: {text[0].lower()}{text[1:]}"

    def on_action(self, s: UserSession, say: Say, parsed: ParsedMessage, message: str) -> None:
        action = parsed.action
        if action is None:
            return
        venue = BY_ID[action.args["venue"]]
        wrong = [k for k, ok in matches(venue, s.slots).items() if not ok]
        if action.args["people"] != s.slots["people"]:
            wrong.append("people")
        if str(action.args["day"]).lower() != s.slots["day"]:
            wrong.append("day")
        offer = f"They offer {venue_text(venue)}, for {action.args['people']} people on {action.args['day']}"
        need = f"I need {_wants(s.slots)} for {s.slots['people']} people on {s.slots['day']}"
        if not wrong:
            say.accept("Perfect, please book it. Thanks!", f"{offer}; {need}, so it matches: I'll book it.")
            return
        say.reject(
            "No, that's not right.",
            f"{offer}; {need}, so the {', '.join(wrong)} is wrong: I'll turn it down.",
            "criticism",
        )
        told = [slot for slot in wrong if s.chance(s.knobs.cooperativeness)]
        for slot in told:
            self.tell(s, say, slot)
        if not told:
            say.say("Did you even listen to me?", "withholding_info")
            say.think("I already told them what I want; I'm not repeating myself.")


_PEOPLE = r"for (\d+) (?:people|persons?)|(\d+) (?:people|of us|guests)"


def _constraints(text: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    area = latest_of({a: rf"\b{a}\b" for a in AREAS}, text)
    food = latest_of({f: rf"\b{f}\b" for f in FOODS}, text)
    cue = {p: rf"\b{p}\b|{re.escape(c)}" for p, c in PRICE_CUES.items()}
    price = latest_of(cue, text)
    day = latest_of({d: rf"\b{d}\b" for d in DAYS}, text)
    people = last_match(_PEOPLE, text)
    parking = latest_of({"yes": r"need free parking", "no": r"parking doesn't matter"}, text)
    for key, value in (("area", area), ("food", food), ("price", price), ("day", day)):
        if value:
            found[key] = value
    if people:
        found["people"] = int(people.group(1) or people.group(2))
    if parking:
        found["parking"] = parking == "yes"
    return found


def _booked(text: str) -> dict[str, Any]:
    """What an agent message's booking named (its venue's features, people, day); {} without one."""
    action = parse_message(text, TravelEnv.actions).action
    venue = BY_ID.get(action.args.get("venue")) if action is not None else None
    if venue is None:
        return {}
    named = {k: venue.get(k) for k in ("area", "price", "food", "parking")}
    return {**named, "people": action.args.get("people"), "day": str(action.args.get("day")).lower()}


def wishes(obs: Observation) -> dict[str, Any]:
    """The user's wishes, message by message, the latest word winning. A reply that repeats what the
    booking just before it named is an echo, not a wish ("Curry Garden in the north for 4, please"
    does not say the user wants the north), so only what differs from that booking counts."""
    known: dict[str, Any] = {}
    booked: dict[str, Any] = {}
    for m in obs.messages[1:]:
        if m["role"] == "assistant":
            booked = _booked(m["content"])
            continue
        said = _constraints(without_feedback(m["content"]))
        known.update({k: v for k, v in said.items() if booked.get(k, object()) != v})
    return known


def agent_policy(obs: Observation) -> str:
    """Ask for what is missing, then book a matching venue; re-read corrections after a decline."""
    kind = obs.public["kind"]
    known = wishes(obs)
    needed = (*CONSTRAINTS[kind], "people", "day")
    missing = [k for k in needed if k not in known]
    questions = {
        "area": "Which area of town?",
        "price": "What price range?",
        "parking": "Do you need parking?",
        "food": "What kind of food?",
        "people": "How many people?",
        "day": "Which day?",
    }
    ask = [k for k in missing if times_asked(obs, questions[k]) < 2]
    if ask and obs.turns_left > 1:
        return " ".join(questions[k] for k in ask)
    pool = [
        v
        for v in obs.public["venues"]
        if all(
            known.get(k) is None
            or (v[k] if k == "parking" and known[k] else k == "parking" or v[k] == known[k])
            for k in CONSTRAINTS[kind]
        )
    ]
    tried = {
        a.args["venue"]
        for a in (parse_message(t, TravelEnv.actions).action for t in agent_texts(obs))
        if a is not None
    }
    venue = ([v for v in pool if v["id"] not in tried] or pool or obs.public["venues"])[0]
    people, day = known.get("people", 2), known.get("day", "friday")
    return booking_message(venue, people, day)
