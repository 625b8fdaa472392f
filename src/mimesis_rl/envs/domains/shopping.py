"""shopping: recommend one product under hidden constraints (category, style, a private budget).

The user wants the best-rated product of a category and style within a budget they would rather
not state. Pricier items are better rated, so without the budget an agent either overshoots it
or settles for less than the best: the budget has to be asked for, sometimes more than once.
"""

from __future__ import annotations

import random
import re
from typing import Any

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import Action, ActionSpec, EpisodeState, Observation, Verdict
from mimesis_rl.envs.scripted.agent import all_user_text, last_match, latest_of, times_asked
from mimesis_rl.envs.scripted.user import UserPolicy, UserSession
from mimesis_rl.envs.task_env import Scenario, TaskEnv, action_specs

CATEGORIES: dict[str, tuple[int, int]] = {  # price band in dollars
    "headphones": (30, 250),
    "backpack": (25, 180),
    "jacket": (40, 300),
    "sneakers": (35, 200),
    "watch": (40, 400),
    "lamp": (15, 120),
}
STYLES = ("sporty", "classic", "minimalist", "rugged", "colorful")
BRANDS = ("Norda", "Kelvo", "Arlo", "Bristle", "Quanta", "Fenn", "Holt", "Mira")

# How users hint at a category or a style without naming it (implicit preferences).
CATEGORY_CUES: dict[str, str] = {
    "headphones": "something to listen to music on my commute",
    "backpack": "something to carry my laptop and stuff around",
    "jacket": "something warm to wear this winter",
    "sneakers": "new shoes for walking around town",
    "watch": "something to keep time on my wrist",
    "lamp": "some light for my desk at home",
}
STYLE_CUES: dict[str, str] = {
    "sporty": "I'm at the gym most days",
    "classic": "I like timeless things that never go out of fashion",
    "minimalist": "I like clean, simple designs without fuss",
    "rugged": "I spend my weekends hiking in the mountains",
    "colorful": "I love bright, cheerful colours",
}
CATEGORY_WORDS: dict[str, str] = {
    "headphones": r"headphones?|earbuds|listen to music",
    "backpack": r"backpack|bag\b|carry my laptop",
    "jacket": r"jacket|coat|warm to wear",
    "sneakers": r"sneakers?|shoes|trainers",
    "watch": r"\bwatch\b|keep time on my wrist",
    "lamp": r"\blamp\b|light for my desk",
}
STYLE_WORDS: dict[str, str] = {
    "sporty": r"sporty|gym|athletic",
    "classic": r"classic|timeless",
    "minimalist": r"minimalist|clean, simple|simple design",
    "rugged": r"rugged|hiking|outdoors",
    "colorful": r"colou?rful|bright",
}


def build_catalogue() -> list[dict[str, Any]]:
    """The fixed catalogue: 3 products per (category, style); within a group, pricier = better rated."""
    rng = random.Random("shopping-catalogue-v1")
    items: list[dict[str, Any]] = []
    for category, (low, high) in CATEGORIES.items():
        for style in STYLES:
            prices = sorted(rng.sample(range(low, high + 1), 3))
            ratings = sorted(round(rng.uniform(3.0, 4.9), 1) for _ in range(3))
            for price, rating in zip(prices, ratings, strict=True):
                items.append(
                    {
                        "id": f"p{len(items) + 1}",
                        "name": f"{rng.choice(BRANDS)} {style} {category}",
                        "category": category,
                        "style": style,
                        "price": price,
                        "rating": rating,
                    }
                )
    return items


CATALOGUE = build_catalogue()
BY_ID = {item["id"]: item for item in CATALOGUE}


def _group(category: str, style: str) -> list[dict[str, Any]]:
    return sorted(
        (i for i in CATALOGUE if i["category"] == category and i["style"] == style), key=lambda i: i["price"]
    )


def best_fit(category: str, style: str, budget: int) -> dict[str, Any] | None:
    """The verifier's answer: the best-rated product of the group within the budget."""
    feasible = [i for i in _group(category, style) if i["price"] <= budget]
    return max(feasible, key=lambda i: (i["rating"], -i["price"])) if feasible else None


class ShoppingEnv(TaskEnv):
    name = "shopping"
    description = "Recommend a product under hidden constraints (category, style, a private budget)."
    max_turns = 8
    actions = action_specs(
        ActionSpec(
            "recommend",
            "final",
            {"item": "str"},
            doc="recommend one product by its id",
            example='<action>{"type": "recommend", "item": "p17"}</action>',
        ),
    )

    def sample(self, rng: random.Random) -> Scenario:
        category = rng.choice(sorted(CATEGORIES))
        style = rng.choice(STYLES)
        group = _group(category, style)
        mid, top = group[1]["price"], group[2]["price"]
        budget = mid + rng.randint(0, max(0, top - mid - 1))
        alternatives = [
            st for st in STYLES if st != style and any(i["price"] <= budget for i in _group(category, st))
        ]
        alt = rng.choice(alternatives) if alternatives else style
        other = rng.choice([c for c in sorted(CATEGORIES) if c != category])
        shown = [i for i in CATALOGUE if i["category"] in (category, other)]
        rng.shuffle(shown)
        goal = GoalCard(
            text=(
                f"You want to buy a {category} in a {style} style. You can spend at most ${budget}, "
                f"but you would rather not say your budget unless the agent asks for it. "
                f"You want the best-rated option that fits. You might change your mind and prefer the "
                f"{alt} style instead."
            ),
            slots={
                "category": category,
                "style": style,
                "budget": budget,
                "changeable": {"style": sorted({style, alt})},
            },
            private=["budget"],
        )
        return Scenario(
            goal=goal,
            public={"catalogue": shown},
            persona={"name": rng.choice(["Alex", "Sam", "Jordan", "Riley", "Casey"])},
        )

    def intro(self, scenario: Scenario) -> str:
        lines = [
            "You are a shopping assistant. Find out what the customer wants (product type, style, "
            "budget) and recommend the single best-rated product that fits all of it.",
            "",
            "Catalogue:",
        ]
        lines += [
            f"{i['id']} | {i['name']} | ${i['price']} | rating {i['rating']}"
            for i in scenario.public["catalogue"]
        ]
        return "\n".join(lines)

    def check_action(self, state: EpisodeState, action: Action) -> str | None:
        shown = {i["id"] for i in state.public["catalogue"]}
        if action.args["item"] not in shown:
            return f"unknown item {action.args['item']!r}; use an id from the catalogue, e.g. p17"
        return None

    def score(self, state: EpisodeState) -> Verdict:
        if state.final_action is None:
            return Verdict(
                reward=0.0,
                success=False,
                scores={"category": 0.0, "style": 0.0, "budget": 0.0, "best": 0.0},
                notes="no recommendation",
            )
        goal = state.goal.slots
        item = BY_ID[state.final_action.args["item"]]
        target = best_fit(goal["category"], goal["style"], goal["budget"])
        scores = {
            "category": float(item["category"] == goal["category"]),
            "style": float(item["style"] == goal["style"]),
            "budget": float(item["price"] <= goal["budget"]),
            "best": float(target is not None and item["id"] == target["id"]),
        }
        success = all(scores.values())
        reward = 1.0 if success else 0.25 * (scores["category"] + scores["style"] + scores["budget"])
        return Verdict(reward=reward, success=success, scores=scores)


class ShoppingUser(UserPolicy):
    domain = "shopping"
    actions = ShoppingEnv.actions
    fact_slots = ("category", "style", "budget")
    ask_patterns = {
        "category": r"what (kind|type|sort) of|which (product|category)|what are you looking for|"
        r"what do you need|product type",
        "style": r"\bstyle|design|taste|\blook\b",
        "budget": r"budget|price|spend|how much|afford|cost",
    }

    def setup(self, s: UserSession) -> None:
        s.memory["implicit_style"] = s.chance(0.5)

    def vague_opening(self, s: UserSession) -> str:
        if s.knobs.disclosure < 0.2 and s.chance(0.5):
            return s.rng.choice(
                ["Hi, I'm looking for something nice for myself.", "Hey, I need a new thing."]
            )
        return (
            s.rng.choice(["Hi! I'm looking for", "Hello, I need", "Hey, I want"])
            + f" {CATEGORY_CUES[s.slots['category']]}."
        )

    def value_text(self, s: UserSession, slot: str) -> str:
        return f"${s.slots[slot]}" if slot == "budget" else super().value_text(s, slot)

    def fact_text(self, s: UserSession, slot: str) -> str:
        if slot == "category":
            return f"It's {s.slots['category']} I'm after."
        if slot == "style":
            if s.memory.get("implicit_style"):
                return STYLE_CUES[s.slots["style"]] + "."
            return f"Something {s.slots['style']}, please."
        return f"I can spend up to ${s.slots['budget']}."

    def tell(self, s: UserSession, say: Any, slot: str, *patterns: str) -> None:
        extra = ("implicit_preference",) if slot == "style" and s.memory.get("implicit_style") else ()
        super().tell(s, say, slot, *patterns, *extra)


def _known(text: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for category, pattern in CATEGORY_WORDS.items():
        if re.search(pattern, text, re.IGNORECASE):
            found["category"] = category
    style = latest_of(STYLE_WORDS, text)
    if style:
        found["style"] = style
    money = last_match(r"\$\s?(\d+)|(\d+)\s*(?:dollars|bucks)", text)
    if money:
        found["budget"] = int(money.group(1) or money.group(2))
    return found


def agent_policy(obs: Observation) -> str:
    """Ask for whatever is missing (all at once), then recommend the best-rated fit."""
    known = _known(all_user_text(obs))
    questions = []
    if "category" not in known and times_asked(obs, "kind of product") < 2:
        questions.append("What kind of product are you looking for?")
    if "style" not in known and times_asked(obs, "which style") < 2:
        questions.append("Which style do you like: sporty, classic, minimalist, rugged or colorful?")
    if "budget" not in known and times_asked(obs, "budget") < 4 and obs.turns_left > 1:
        asked = times_asked(obs, "budget")
        questions.append(
            "What's your budget?"
            if asked == 0
            else "What's your budget, roughly? I ask so that I only suggest things you can afford."
        )
    if questions and obs.turns_left > 1:
        return " ".join(questions)
    items = obs.public["catalogue"]
    same_kind = [i for i in items if i["category"] == known.get("category", i["category"])]
    # a category and style no item has (a user's words can name any pair): the category, else anything
    pool = [i for i in same_kind if i["style"] == known.get("style", i["style"])] or same_kind or items
    if "budget" in known:
        pool = [i for i in pool if i["price"] <= known["budget"]] or pool
        best = max(pool, key=lambda i: (i["rating"], -i["price"]))
    else:
        best = min(pool, key=lambda i: i["price"])
    return (
        f"I recommend the {best['name']} for ${best['price']}. "
        f'<action>{{"type": "recommend", "item": "{best["id"]}"}}</action>'
    )
