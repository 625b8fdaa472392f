"""bargain: the agent sells a second-hand item to a buyer with a hidden reservation price.

The agent knows the list price and its own floor; the buyer knows how much they would pay at
most and concedes towards it as offers come in (slowly when tough). Success is a deal that wins
at least half of the bargaining zone between the seller's floor and the buyer's maximum.
"""

from __future__ import annotations

import random

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.actions import parse_message
from mimesis_rl.envs.protocols import Action, ActionSpec, EpisodeState, Observation, ParsedMessage, Verdict
from mimesis_rl.envs.scripted.agent import agent_texts, last_match, last_user, times_asked, user_texts
from mimesis_rl.envs.scripted.user import Say, UserPolicy, UserSession
from mimesis_rl.envs.task_env import Scenario, TaskEnv, action_specs

ITEMS: dict[str, tuple[int, int]] = {  # list price range in dollars
    "road bike": (300, 900),
    "leather couch": (400, 1200),
    "mirrorless camera": (350, 1100),
    "acoustic guitar": (150, 600),
    "espresso machine": (120, 500),
    "standing desk": (150, 450),
    "kayak": (250, 800),
    "gaming laptop": (500, 1500),
}


def success_share(price: float, floor: float, reservation: float) -> float:
    """Share of the bargaining zone [floor, reservation] the seller captured, clipped to [0, 1]."""
    if reservation <= floor:
        return 1.0 if price >= floor else 0.0
    return min(1.0, max(0.0, (price - floor) / (reservation - floor)))


class BargainEnv(TaskEnv):
    name = "bargain"
    description = "Sell an item to a buyer with a hidden maximum price; win a good share of the deal."
    max_turns = 10
    actions = action_specs(
        ActionSpec(
            "offer",
            "propose",
            {"price": "number"},
            doc="offer the item at this price",
            example='<action>{"type": "offer", "price": 420}</action>',
        ),
        ActionSpec(
            "walk_away",
            "final",
            {},
            doc="end the negotiation without a deal",
            example='<action>{"type": "walk_away"}</action>',
        ),
    )

    def sample(self, rng: random.Random) -> Scenario:
        item = rng.choice(sorted(ITEMS))
        low, high = ITEMS[item]
        list_price = rng.randrange(low, high + 1, 10)
        floor = round(list_price * rng.uniform(0.55, 0.7))
        reservation = round(rng.uniform(floor + 0.12 * list_price, 0.95 * list_price))
        goal = GoalCard(
            text=(
                f"You want to buy the {item} listed at ${list_price}. You will pay at most ${reservation} "
                f"and would rather not reveal that; you want it as cheap as possible and haggle."
            ),
            slots={"item": item, "list_price": list_price, "reservation": reservation},
            private=["reservation"],
        )
        return Scenario(
            goal=goal,
            public={"item": item, "list_price": list_price, "floor": floor},
            persona={"role": "buyer"},
        )

    def intro(self, scenario: Scenario) -> str:
        p = scenario.public
        return (
            f"You are selling a used {p['item']} listed at ${p['list_price']}. Never sell below "
            f"${p['floor']}, your minimum. Negotiate with the buyer and close a deal at the best "
            f"price you can get."
        )

    def check_action(self, state: EpisodeState, action: Action) -> str | None:
        if action.type == "offer":
            price = action.args["price"]
            if price <= 0:
                return f"price must be positive, got {price}"
            if price < state.public["floor"]:
                return f"price {price} is below your minimum of {state.public['floor']}"
        return None

    def score(self, state: EpisodeState) -> Verdict:
        action = state.final_action
        if action is None or action.type != "offer" or not state.accepted:
            return Verdict(reward=0.0, success=False, scores={"deal": 0.0, "share": 0.0}, notes="no deal")
        price = float(action.args["price"])
        share = success_share(price, state.public["floor"], state.goal.slots["reservation"])
        return Verdict(
            reward=round(0.3 + 0.7 * share, 6),
            success=share >= 0.5,
            scores={"deal": 1.0, "share": round(share, 4), "price": price},
        )


def _money(value: float) -> str:
    return f"${round(value)}"


class BargainUser(UserPolicy):
    domain = "bargain"
    actions = BargainEnv.actions
    slot_labels = {"reservation": "budget"}
    fact_slots = ("reservation",)
    ask_patterns = {"reservation": r"budget|how much|willing to pay|what.*(pay|offer)|price in mind|afford"}

    def setup(self, s: UserSession) -> None:
        s.memory["offers_seen"] = 0

    def willing(self, s: UserSession) -> float:
        """The highest price the buyer accepts now: starts below the maximum, rises with each offer."""
        r = s.slots["reservation"]
        return r - s.knobs.toughness * 0.3 * r * (0.75 ** s.memory["offers_seen"])

    def counter(self, s: UserSession) -> int:
        return round(self.willing(s) * (0.92 - 0.12 * s.knobs.toughness))

    def vague_opening(self, s: UserSession) -> str:
        return s.rng.choice(
            [
                f"Hi, is the {s.slots['item']} still available?",
                f"Hello, I saw your {s.slots['item']}. Is the price negotiable?",
            ]
        )

    def fact_text(self, s: UserSession, slot: str) -> str:
        r = s.slots["reservation"]
        if s.knobs.toughness < 0.3:
            s.memory["named"] = r
            return f"My budget is {_money(r)}."
        s.memory["named"] = round(r * (1 - 0.25 * s.knobs.toughness))
        return f"I was hoping to pay around {_money(s.memory['named'])}."

    def value_text(self, s: UserSession, slot: str) -> str:
        return _money(s.slots[slot])

    def on_talk(self, s: UserSession, say: Say, message: str) -> None:
        if s.memory["offers_seen"] == 0 and s.chance(0.7):
            say.say(f"Would you take {_money(self.counter(s))}?", "negotiation")
            say.think("I'll anchor low before they name a price.")
            return
        self.answer_generic(s, say)

    def on_action(self, s: UserSession, say: Say, parsed: ParsedMessage, message: str) -> None:
        action = parsed.action
        if action is None or action.type != "offer":
            return
        price = float(action.args["price"])
        willing = max(self.willing(s), s.memory.get("named", 0))
        s.memory["offers_seen"] += 1
        offer, limit = _money(price), _money(s.slots["reservation"])
        grounded = f"They offer {offer}; I'd pay at most {limit}, so {offer}"
        if price <= willing:
            say.accept(f"Deal at {offer}.", f"{grounded} is within my limit: I'll take it.")
            return
        counter = min(self.counter(s), round(price) - 5)
        why = (
            f"{grounded} is over my {limit} limit: I'll counter at {_money(counter)}."
            if price > s.slots["reservation"]
            else f"{grounded} is within my limit, but I can still get it cheaper: "
            f"I'll counter at {_money(counter)}."
        )
        say.reject(s.rng.choice(["That's too much for me.", "Hmm, that's more than I want to spend."]), why)
        if s.knobs.pushback and s.chance(s.knobs.pushback):
            say.say(s.rng.choice(["It's used, after all.", "I've seen cheaper ones online."]), "pushback")
        say.say(f"How about {_money(counter)}?", "negotiation")


def _offers(obs: Observation) -> list[float]:
    """The agent's offers so far, in order."""
    parsed = (parse_message(text, BargainEnv.actions).action for text in agent_texts(obs))
    return [float(a.args["price"]) for a in parsed if a is not None and a.type == "offer"]


def agent_policy(obs: Observation) -> str:
    """Ask the budget once, then split the difference with the buyer's counters, never below floor."""
    floor, list_price = obs.public["floor"], obs.public["list_price"]
    history = "\n".join(user_texts(obs))
    stated = last_match(
        r"budget is \$\s?(\d+)|up to \$\s?(\d+)|at most \$\s?(\d+)|max(?:imum)? is \$\s?(\d+)", history
    )
    offers = _offers(obs)
    last = offers[-1] if offers else None
    budget = max(floor, int(next(g for g in stated.groups() if g))) if stated else None
    if budget is not None and budget not in offers:
        # the buyer's stated budget, offered once: turned down, it is haggled from like any offer
        # (re-offering it every other turn looped against a buyer who neither took it nor left)
        return f'For you, {budget} works. <action>{{"type": "offer", "price": {budget}}}</action>'
    if times_asked(obs, "budget") == 0 and obs.turns_left > 2:
        return f"It's in great shape and listed at ${list_price}. What's your budget?"
    counter = last_match(r"\$\s?(\d+)", last_user(obs))
    if last is None:
        price = round(list_price * 0.97)
        if counter:
            price = max(floor, round((list_price + int(counter.group(1))) / 2))
    elif (
        counter
        and int(counter.group(1)) >= floor
        and (obs.turns_left <= 2 or last - int(counter.group(1)) < 15)
    ):
        price = int(counter.group(1))
    elif counter:
        price = max(floor, round(last - (last - int(counter.group(1))) / 3))
    else:
        price = max(floor, round(last * 0.95))
    price = min(price, list_price)
    if obs.turns_left <= 1:
        price = max(floor, int(counter.group(1)) if counter and int(counter.group(1)) >= floor else floor)
    return f'I can do {price}. <action>{{"type": "offer", "price": {price}}}</action>'
