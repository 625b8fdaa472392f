"""returns: refunds and exchanges under a written policy, for customers who hold back details.

The agent has the store's return policy and the recent orders list; the customer wants their
money back, opens with a vague complaint and gives the order number and the item's condition
only when asked (some never volunteer that they used the item). The right decision follows from
the policy, not from what the customer would like.
"""

from __future__ import annotations

import random
import re
from typing import Any

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import Action, ActionSpec, EpisodeState, Observation, ParsedMessage, Verdict
from mimesis_rl.envs.scripted.agent import all_user_text, last_match, latest_of, times_asked
from mimesis_rl.envs.scripted.user import Say, UserPolicy, UserSession
from mimesis_rl.envs.task_env import Scenario, TaskEnv, action_specs

POLICY = """Return policy:
1. Damaged or defective on arrival: full refund within 90 days of delivery.
2. Final-sale items cannot be returned unless damaged (rule 1).
3. Unused items in original packaging, within 30 days: full refund.
4. Opened or used items, within 30 days: exchange only.
5. Any non-damaged item 31 to 60 days after delivery: store credit only.
6. Everything else: the return is denied."""
DECISIONS = ("refund", "exchange", "store_credit", "deny")
CONDITIONS = ("unused", "opened", "damaged")
PRODUCTS = (
    "blender",
    "wireless speaker",
    "winter boots",
    "yoga mat",
    "desk chair",
    "coffee grinder",
    "rain jacket",
    "board game",
    "smartwatch",
    "cookware set",
    "hair dryer",
    "table lamp",
)
CONDITION_TEXT = {
    "unused": "I never even took it out of the box.",
    "opened": "I opened it and used it a couple of times.",
    "damaged": "It arrived damaged, broken right out of the box.",
}
REASON_TEXT = {
    "unused": "I changed my mind about it",
    "opened": "it's not what I expected",
    "damaged": "it arrived broken",
}


def decide(condition: str, days: int, final_sale: bool) -> str:
    """The policy, as the verifier applies it."""
    if condition == "damaged":
        return "refund" if days <= 90 else "deny"
    if final_sale:
        return "deny"
    if days <= 30:
        return "refund" if condition == "unused" else "exchange"
    if days <= 60:
        return "store_credit"
    return "deny"


class ReturnsEnv(TaskEnv):
    name = "returns"
    description = "Handle a refund/exchange request under a written policy; customers hold back details."
    max_turns = 8
    actions = action_specs(
        ActionSpec(
            "resolve",
            "final",
            {"order": "str", "decision": "str"},
            doc=f"settle the request for an order; decision is one of {', '.join(DECISIONS)}",
            example='<action>{"type": "resolve", "order": "A1234", "decision": "exchange"}</action>',
        ),
    )

    @classmethod
    def card_facts(cls, slots: dict[str, Any]) -> dict[str, Any]:
        """The item's condition in the words the user says it ("It arrived damaged, broken right out of
        the box"), which is what the agent's policy reads, and not the policy's `decision`: that is the
        agent's to reach, not something the customer knows. A card without this environment's
        slots (a corpus conversation) stays as it is."""
        if slots.get("condition") not in CONDITION_TEXT or "decision" not in slots:
            return dict(slots)
        facts = {k: v for k, v in slots.items() if k not in ("condition", "decision", "final_sale")}
        return {**facts, "condition": CONDITION_TEXT[slots["condition"]].rstrip(".")}

    def sample(self, rng: random.Random) -> Scenario:
        orders = [
            {
                "order": f"A{number}",
                "item": rng.choice(PRODUCTS),
                "delivered_days_ago": rng.choice((3, 8, 15, 22, 28, 35, 44, 52, 58, 70, 85, 120)),
                "final_sale": rng.random() < 0.2,
            }
            for number in rng.sample(range(1000, 10000), 8)
        ]
        mine = rng.choice(orders)
        condition = rng.choice(CONDITIONS)
        decision = decide(condition, mine["delivered_days_ago"], mine["final_sale"])
        goal = GoalCard(
            text=(
                f"You want to return the {mine['item']} from order {mine['order']} (delivered "
                f"{mine['delivered_days_ago']} days ago) and you'd like a refund. The item is {condition}. "
                f"You start vague and give the order number and the item's condition only when asked; "
                f"you'd rather not admit you used it."
            ),
            slots={
                "order": mine["order"],
                "item": mine["item"],
                "condition": condition,
                "days": mine["delivered_days_ago"],
                "final_sale": mine["final_sale"],
                "decision": decision,
            },
            private=["condition"],
        )
        return Scenario(goal=goal, public={"orders": orders, "policy": POLICY})

    def intro(self, scenario: Scenario) -> str:
        lines = [
            "You are a customer-service agent handling returns. Find out which order the customer means "
            "and the item's condition, then settle the request exactly as the policy says, even if the "
            "customer wants something else.",
            "",
            POLICY,
            "",
            "Recent orders:",
        ]
        lines += [
            f"{o['order']} | {o['item']} | delivered {o['delivered_days_ago']} days ago"
            + (" | FINAL SALE" if o["final_sale"] else "")
            for o in scenario.public["orders"]
        ]
        return "\n".join(lines)

    def check_action(self, state: EpisodeState, action: Action) -> str | None:
        known = {o["order"] for o in state.public["orders"]}
        if action.args["order"] not in known:
            return f"unknown order {action.args['order']!r}; one of: {', '.join(sorted(known))}"
        if action.args["decision"] not in DECISIONS:
            return f"decision must be one of {', '.join(DECISIONS)}, got {action.args['decision']!r}"
        return None

    def score(self, state: EpisodeState) -> Verdict:
        action, slots = state.final_action, state.goal.slots
        if action is None:
            return Verdict(
                reward=0.0, success=False, scores={"order": 0.0, "decision": 0.0}, notes="unresolved"
            )
        order_ok = action.args["order"] == slots["order"]
        decision_ok = order_ok and action.args["decision"] == slots["decision"]
        return Verdict(
            reward=0.3 * order_ok + 0.7 * decision_ok,
            success=decision_ok,
            scores={"order": float(order_ok), "decision": float(decision_ok)},
        )


class ReturnsUser(UserPolicy):
    domain = "returns"
    actions = ReturnsEnv.actions
    slot_labels = {"order": "order number", "condition": "item's condition", "item": "item"}
    fact_slots = ("item", "order", "condition")
    ask_patterns = {
        "item": r"which (item|product)|what did you (buy|order)|what item",
        "order": r"order (number|id|#)|which order|order\b",
        "condition": r"condition|used|opened|damaged|unused|state of|original packaging",
    }

    def vague_opening(self, s: UserSession) -> str:
        return s.rng.choice(
            [
                "Hi, I want to return something.",
                "I need to send something back and get my money.",
                "Hello, I'm not happy with something I bought.",
            ]
        )

    def fact_text(self, s: UserSession, slot: str) -> str:
        if slot == "item":
            return f"It's the {s.slots['item']}, {REASON_TEXT[s.slots['condition']]}."
        if slot == "order":
            return f"The order number is {s.slots['order']}."
        return CONDITION_TEXT[s.slots["condition"]]

    def on_talk(self, s: UserSession, say: Say, message: str) -> None:
        wanted = re.search(r"store credit|exchange|cannot|can't|unfortunately|only", message, re.IGNORECASE)
        if wanted and s.knobs.pushback and s.chance(s.knobs.pushback):
            say.say("That's ridiculous, I want my money back.", "pushback", "criticism")
            say.think("I don't accept anything but a refund; maybe they'll give in if I push.")
            say.mood = "neg"
            return
        self.answer_generic(s, say)

    def on_action(self, s: UserSession, say: Say, parsed: ParsedMessage, message: str) -> None:
        say.say("Okay.")


_ORDER_RE = r"\b(A\d{4})\b"
# "It's not damaged" says what the condition is not: read as no answer, so the agent asks again.
_NEGATED = re.compile(
    r"\b(?:not|isn'?t|wasn'?t|never)\s+(?:\w+\s+)?(?:damaged|broken|defective|opened|used)\b", re.IGNORECASE)


def agent_policy(obs: Observation) -> str:
    """Get the order number and the condition, then apply the written policy."""
    text = all_user_text(obs)
    orders = {o["order"]: o for o in obs.public["orders"]}
    order = last_match(_ORDER_RE, text)
    order_id = order.group(1).upper() if order and order.group(1).upper() in orders else None
    if order_id is None:
        items = [o for o in orders.values() if re.search(rf"\b{re.escape(o['item'])}\b", text, re.IGNORECASE)]
        if len(items) == 1:
            order_id = items[0]["order"]
    condition = latest_of(
        {
            "damaged": r"damaged|broken|defective",
            "opened": r"opened it|used it|tried it",
            "unused": r"never even took it out|unused|still in the box",
        },
        _NEGATED.sub(" ", text),
    )
    questions = []
    if order_id is None and times_asked(obs, "order number") < 3:
        questions.append("Could you give me your order number?")
    if condition is None and times_asked(obs, "condition") < 3:
        questions.append(
            "What condition is the item in: unused, opened or used, or damaged? I need it because "
            "the policy depends on it."
            if times_asked(obs, "condition")
            else "What condition is the item in: unused, opened or used, or damaged?"
        )
    if questions and obs.turns_left > 1:
        return " ".join(questions)
    if order_id is None:
        order_id = next(iter(orders))
    o = orders[order_id]
    decision = decide(condition or "opened", o["delivered_days_ago"], o["final_sale"])
    return (
        f"Under our policy this is settled as: {decision.replace('_', ' ')}. "
        f'<action>{{"type": "resolve", "order": "{order_id}", "decision": "{decision}"}}</action>'
    )
