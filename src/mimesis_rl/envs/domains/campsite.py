"""campsite: multi-issue negotiation over Food, Water and Firewood, scored in points as in CaSiNo.

Three packages of each item are split between the agent and the user. Each side ranks the items
High / Medium / Low (5 / 4 / 3 points per package) for private reasons; no deal gives both sides
the walk-away value of 5 points. Priorities often differ, so an agent that finds out what the
user needs most can give it away cheaply and keep what it needs itself.
"""

from __future__ import annotations

import itertools
import math
import random
import re

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.actions import action_tag, parse_message
from mimesis_rl.envs.protocols import Action, ActionSpec, EpisodeState, Observation, ParsedMessage, Verdict
from mimesis_rl.envs.scripted.agent import agent_texts, all_user_text, last_user, latest_of, times_asked
from mimesis_rl.envs.scripted.user import Say, UserPolicy, UserSession
from mimesis_rl.envs.task_env import Scenario, TaskEnv, action_specs

ITEMS = ("food", "water", "firewood")
POINTS = {"High": 5, "Medium": 4, "Low": 3}
UNITS = 3
WALK_AWAY = 5
MAX_POINTS = UNITS * sum(POINTS.values())  # 36
FAIR_USER_POINTS = 22  # what a reasonable partner holds out for (the verifier's benchmark)
REASONS: dict[str, tuple[str, ...]] = {
    "food": (
        "we have three kids who eat a lot",
        "I have a medical condition and need to eat often",
        "we're staying an extra day",
    ),
    "water": (
        "it's going to be very hot this weekend",
        "we plan long hikes every day",
        "there's no clean stream near our site",
    ),
    "firewood": (
        "it gets really cold at night up there",
        "we love cooking over a campfire",
        "my partner gets sick easily in the cold",
    ),
}
REASON_WORDS = {
    "food": r"eat|hungry|kids|meal",
    "water": r"hot|hike|hiking|thirst|stream|dehydrat",
    "firewood": r"cold|campfire|warm|fire\b",
}
SPLITS: list[dict[str, int]] = [
    dict(zip(ITEMS, c, strict=True)) for c in itertools.product(range(UNITS + 1), repeat=len(ITEMS))
]


def points(keep: dict[str, int], priorities: dict[str, str]) -> int:
    return sum(keep[item] * POINTS[priorities[item]] for item in ITEMS)


def complement(keep: dict[str, int]) -> dict[str, int]:
    return {item: UNITS - keep[item] for item in ITEMS}


def best_for_agent(agent: dict[str, str], user_values: dict[str, float], user_needs: float) -> dict[str, int]:
    """The split the agent likes most among those that give the user at least `user_needs` points."""
    ok = [s for s in SPLITS if sum(complement(s)[i] * user_values[i] for i in ITEMS) >= user_needs]
    if not ok:
        ok = SPLITS
    return max(ok, key=lambda s: (points(s, agent), sum(complement(s)[i] * user_values[i] for i in ITEMS)))


def _ranking(rng: random.Random) -> dict[str, str]:
    order = list(ITEMS)
    rng.shuffle(order)
    return dict(zip(order, ("High", "Medium", "Low"), strict=True))


def _by_level(priorities: dict[str, str]) -> dict[str, str]:
    return {level.lower(): item for item, level in priorities.items()}


def _describe(keep: dict[str, int]) -> str:
    return ", ".join(f"{keep[i]} {i}" for i in ITEMS)


def proposal_message(keep: dict[str, int]) -> str:
    """A proposal that names both shares. Why: the user decides by what it is left, and a learned user
    can copy its share from the message but does not subtract it (the facts-first simulator stated the
    agent's own share as its own in 109 of 114 campsite replies)."""
    return (f"How about I keep {_describe(keep)} and you take {_describe(complement(keep))}? "
            + action_tag("propose", **keep))


def itemised(share: dict[str, int], priorities: dict[str, str]) -> str:
    """A share item by item with each item's level and points ("3 food (High, 15), 0 water (Low, 0)"),
    so the sum a decision rests on is built from steps a small model can copy and look up."""
    return ", ".join(f"{share[i]} {i} ({priorities[i]}, {share[i] * POINTS[priorities[i]]})" for i in ITEMS)


class CampsiteEnv(TaskEnv):
    name = "campsite"
    description = "Split food, water and firewood with another camper (CaSiNo points: 5/4/3, walk-away 5)."
    max_turns = 10
    actions = action_specs(
        ActionSpec(
            "propose",
            "propose",
            {"food": "int", "water": "int", "firewood": "int"},
            doc="propose a split: how many packages (0-3) of each item YOU keep; the user gets the rest",
            example='<action>{"type": "propose", "food": 2, "water": 1, "firewood": 3}</action>',
        ),
        ActionSpec(
            "walk_away",
            "final",
            {},
            doc="end without a deal (both sides get 5 points)",
            example='<action>{"type": "walk_away"}</action>',
        ),
    )

    def sample(self, rng: random.Random) -> Scenario:
        user, agent = _ranking(rng), _ranking(rng)
        user_reasons = {item: rng.choice(REASONS[item]) for item in ITEMS}
        agent_reasons = {
            item: rng.choice([r for r in REASONS[item] if r != user_reasons[item]]) for item in ITEMS
        }
        levels = _by_level(user)
        goal = GoalCard(
            text=(
                f"You are going camping and negotiate the extra supplies (3 packages each of food, water and "
                f"firewood) with a neighbour. Your priorities: {levels['high']} High "
                f"({user_reasons[levels['high']]}), {levels['medium']} Medium "
                f"({user_reasons[levels['medium']]}), {levels['low']} Low. Each package is worth 5 (High), "
                f"4 (Medium) or 3 (Low) points to you; without a deal you get 5 points. You'd rather not "
                f"reveal your top priority too early."
            ),
            slots={
                "priorities": user,
                "reasons": user_reasons,
                "high": levels["high"],
                "medium": levels["medium"],
                "low": levels["low"],
            },
            private=["high"],
        )
        return Scenario(
            goal=goal, public={"priorities": agent, "reasons": agent_reasons}, persona={"role": "camper"}
        )

    def intro(self, scenario: Scenario) -> str:
        p, r = scenario.public["priorities"], scenario.public["reasons"]
        mine = ", ".join(
            f"{item} {p[item]} ({r[item]})" for item in sorted(ITEMS, key=lambda i: -POINTS[p[i]])
        )
        return (
            f"You are a camper negotiating with your neighbour how to split 3 packages each of food, water "
            f"and firewood. Your priorities: {mine}. Each package you keep is worth 5 (High), 4 (Medium) or "
            f"3 (Low) points; without a deal both sides get 5. Find out what the neighbour needs and reach a "
            f"deal that gives you as many points as possible while the neighbour still agrees."
        )

    def check_action(self, state: EpisodeState, action: Action) -> str | None:
        if action.type == "propose":
            bad = [f"{i}={action.args[i]}" for i in ITEMS if not 0 <= action.args[i] <= UNITS]
            if bad:
                return f"counts must be between 0 and {UNITS}: {', '.join(bad)}"
        return None

    def score(self, state: EpisodeState) -> Verdict:
        agent, user = state.public["priorities"], state.goal.slots["priorities"]
        action = state.final_action
        if action is None or action.type != "propose" or not state.accepted:
            return Verdict(
                reward=WALK_AWAY / MAX_POINTS,
                success=False,
                scores={"deal": 0.0, "agent_points": WALK_AWAY, "user_points": WALK_AWAY},
                notes="no deal: walk-away points",
            )
        keep = {i: int(action.args[i]) for i in ITEMS}
        mine, theirs = points(keep, agent), points(complement(keep), user)
        target = points(best_for_agent(agent, {i: POINTS[user[i]] for i in ITEMS}, FAIR_USER_POINTS), agent)
        return Verdict(
            reward=round(mine / MAX_POINTS, 6),
            success=mine >= target - 2,
            scores={"deal": 1.0, "agent_points": mine, "user_points": theirs, "target": target},
        )


class CampsiteUser(UserPolicy):
    domain = "campsite"
    actions = CampsiteEnv.actions
    slot_labels = {"high": "top priority", "medium": "second priority", "low": "least needed item"}
    fact_slots = ("high", "low", "medium")
    ask_patterns = {
        "high": r"most important|matters? most|need most|top priority|priorit|what do you need",
        "low": r"least|need less|don't need|can spare|priorit",
        "medium": r"second|priorit",
    }

    def setup(self, s: UserSession) -> None:
        s.memory["proposals"] = 0
        s.memory["implicit"] = s.chance(0.5)

    def threshold(self, s: UserSession) -> float:
        return max(19.0, 21 + 6 * s.knobs.toughness - 1.5 * s.memory["proposals"])

    def vague_opening(self, s: UserSession) -> str:
        return s.rng.choice(
            [
                "Hi neighbour! Shall we figure out how to share the extra supplies?",
                "Hey there, looking forward to the camping trip? Let's split the extra packages.",
            ]
        )

    def fact_text(self, s: UserSession, slot: str) -> str:
        item = s.slots[slot]
        reason = s.slots["reasons"][item]
        if slot == "high":
            if s.memory["implicit"]:
                return f"Honestly, {reason}."
            return f"{item.capitalize()} matters most to us, because {reason}."
        if slot == "medium":
            return f"{item.capitalize()} would be nice too, {reason}."
        return f"We don't need much {item}."

    def tell(self, s: UserSession, say: Say, slot: str, *patterns: str) -> None:
        extra = ("implicit_preference",) if slot == "high" and s.memory["implicit"] else ()
        super().tell(s, say, slot, *patterns, *extra)

    def counter(self, s: UserSession) -> dict[str, int]:
        """What the user proposes instead: the agent's share, greedier for tougher users."""
        high, medium, low = s.slots["high"], s.slots["medium"], s.slots["low"]
        if s.knobs.toughness >= 0.7:
            keep = {high: 3, medium: 2, low: 1}
        else:
            keep = {high: 3, medium: 2, low: 0} if s.memory["proposals"] > 1 else {high: 3, medium: 2, low: 1}
        return complement(keep)

    def on_action(self, s: UserSession, say: Say, parsed: ParsedMessage, message: str) -> None:
        action = parsed.action
        if action is None or action.type != "propose":
            return
        agent_keep = {i: int(action.args[i]) for i in ITEMS}
        mine = points(complement(agent_keep), s.slots["priorities"])
        s.memory["proposals"] += 1
        need = math.ceil(self.threshold(s))
        grounded = (
            f"They'd leave me {itemised(complement(agent_keep), s.slots['priorities'])}; that's {mine} "
            f"points, and I need at least {need}, so {mine}"
        )
        if mine >= need:
            say.accept("Deal, that works for us!", f"{grounded} is enough: I'll take it.")
            return
        say.reject(
            s.rng.choice(["Hmm, that doesn't work for us.", "No, that leaves us short."]),
            f"{grounded} is short of it: I'll counter.",
        )
        if s.knobs.pushback and s.chance(s.knobs.pushback):
            high = s.slots["high"]
            say.say(f"We really can't go without {high}, {s.slots['reasons'][high]}.", "pushback")
            s.told.add("high")
        counter = complement(self.counter(s))
        say.say(f"How about I take {_describe(counter)}?", "negotiation")
        say.think(f"I'd like to keep {_describe(counter)}.")


_COUNTER_RE = re.compile(
    r"I take (\d) (food|water|firewood), (\d) (food|water|firewood),? (?:and )?(\d) "
    r"(food|water|firewood)",
    re.IGNORECASE,
)


def _user_values(text: str) -> dict[str, float]:
    """Estimated points per package for the user, from what they said (4 when unknown)."""
    values = {i: 4.0 for i in ITEMS}
    high = latest_of({i: rf"{i} matters most|can't go without {i}" for i in ITEMS}, text)
    if high is None:
        high = latest_of(REASON_WORDS, text)
    low = latest_of({i: rf"don't need much {i}" for i in ITEMS}, text)
    if high:
        values[high] = 5.0
    if low and low != high:
        values[low] = 3.0
    if high and low and low != high:
        values[next(i for i in ITEMS if i not in (high, low))] = 4.0
    return values


def _their_counter(text: str) -> dict[str, int] | None:
    m = _COUNTER_RE.search(text)
    if not m:
        return None
    keep = {m.group(2 * k + 2).lower(): int(m.group(2 * k + 1)) for k in range(3)}
    return complement(keep) if set(keep) == set(ITEMS) else None


def agent_policy(obs: Observation) -> str:
    """Ask what the neighbour needs, then propose the best split they should accept; concede on refusal."""
    mine: dict[str, str] = obs.public["priorities"]
    text = all_user_text(obs)
    values = _user_values(text)
    proposals = [
        p
        for p in (parse_message(t, CampsiteEnv.actions).action for t in agent_texts(obs))
        if p is not None and p.type == "propose"
    ]
    if (
        all(v == 4.0 for v in values.values())
        and times_asked(obs, "matters most to you") < 2
        and obs.turns_left > 2
    ):
        top = max(ITEMS, key=lambda i: POINTS[mine[i]])
        return (
            f"Which item matters most to you, and which do you need least? For us {top} is the most "
            f"important, because {obs.public['reasons'][top]}."
        )
    plan = best_for_agent(mine, values, 21 + 2 * len(proposals))
    counter = _their_counter(last_user(obs))
    if (
        counter is not None
        and (points(counter, mine) >= points(plan, mine) - 1 or obs.turns_left <= 2)
        and points(counter, mine) > WALK_AWAY
    ):
        plan = counter
    return proposal_message(plan)
