"""Does a user turn contradict its goal card? Shared by the simulator runtime (a contradicting turn
is re-sampled) and `sim_eval`'s environment part (contradictions per delivered user turn).

A contradiction is a stated value of one of the card's slots that the card does not hold: a word
value another card of the domain uses ("a rugged jacket" when the card says sporty), a number said
with the slot's name or a usual phrase for it ("I can spend $150" for a $91 budget), an order number
of another shape-alike id, or another item named as the campsite top priority. A changeable slot's
listed alternatives are not contradictions (changing one's mind is a behaviour, not an error).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.simulator.rewards.goal import contradictions, slot_vocabulary

# Slots that are bookkeeping for the verifier, not facts a user states.
_NOT_FACTS = {"changeable", "reasons", "checks", "seen", "method", "misconception", "cause", "list_price"}

# Numeric slots stated without their slot name ("I can spend $120"), and whether stating a lower
# number is fine (a haggler's bluff under its real limit is strategy, not a contradiction).
_NUMBER_WORDS: dict[str, tuple[str, bool]] = {
    "budget": (
        r"budget|spend|afford|(?:pay|go) (?:up to|at most|max(?:imum)?)|my (?:max(?:imum)?|limit)",
        False,
    ),
    "reservation": (
        r"budget|afford|(?:pay|go) (?:up to|at most|max(?:imum)?)|my (?:max(?:imum)?|limit)",
        True,
    ),
    "people": (r"people|persons|guests|of us", False),
    "days": (r"days?", False),
}
_ID_SHAPE = re.compile(r"^[A-Z]\d{3,}$")  # order numbers like A6681
_PRIORITY_ITEMS = r"food|water|firewood"
_PRIORITY = (
    re.compile(
        rf"\b({_PRIORITY_ITEMS})\b\W+(?:is|are)\W+(?:\w+\W+)?(?:top|highest|biggest|main|first)\W+priority",
        re.IGNORECASE,
    ),
    re.compile(rf"\b(?:need|want)\W+(?:the\W+)?({_PRIORITY_ITEMS})\W+(?:the\W+)?most\b", re.IGNORECASE),
    re.compile(
        rf"\b(?:top|highest|biggest|main|first)\W+priority\W+(?:is\W+)?(?:the\W+)?({_PRIORITY_ITEMS})\b",
        re.IGNORECASE,
    ),
)
_NEGATED = re.compile(r"\b(?:not|no|don'?t|doesn'?t|never|isn'?t)\W+(?:\w+\W+){0,2}$", re.IGNORECASE)


def fact_slots(goal: GoalCard) -> dict[str, Any]:
    """The card's stateable facts; a changeable slot takes its current value or a listed alternative
    (a user who changes its mind to an allowed option does not contradict its card)."""
    changeable = goal.slots.get("changeable") or {}
    out: dict[str, Any] = {}
    for name, value in goal.slots.items():
        if name in _NOT_FACTS or isinstance(value, bool):
            continue
        if name in changeable:
            out[name] = [value, *[v for v in changeable[name] if v != value]]
        else:
            out[name] = value
    return out


@lru_cache(maxsize=16)
def domain_vocabulary(domain: str, cards: int = 300) -> dict[str, frozenset[str]]:
    """slot -> the values that slot takes across `cards` seeded goal cards of the domain: what a
    user of this domain could say instead of its own value."""
    from mimesis_rl.envs.registry import make_env

    env = make_env(domain)
    vocab = slot_vocabulary(fact_slots(env.reset(seed).goal) for seed in range(cards))
    return {k: frozenset(v) for k, v in vocab.items()}


def _stated_numbers(message: str, words: str) -> list[float]:
    after = rf"\b(?:{words})\b(?:\W+\w+){{0,3}}?\W+\$?(\d+(?:\.\d+)?)"
    before = rf"\$?(\d+(?:\.\d+)?)\s+(?:\w+\s+)?(?:{words})\b"
    out = []
    for pattern in (after, before):
        for match in re.finditer(pattern, message, re.IGNORECASE):
            out.append(float(match.group(1)))
    return out


def goal_contradictions(message: str, goal: GoalCard, domain: str) -> list[str]:
    """Names of the goal slots this user message contradicts.

    Word values: another value the slot takes in this domain's cards, affirmed (not negated) and
    without the card's own value in the message ("a rugged jacket" when the card says sporty).
    Numbers: a number stated with the slot's name or a usual phrase for it ("I can spend $150" for
    a $91 budget; a haggler naming less than its limit is not counted). Order numbers of another
    shape-alike id. Campsite: naming another item as the top priority.
    """
    if not message.strip():
        return []
    slots = fact_slots(goal)
    vocabulary = {k: set(v) for k, v in domain_vocabulary(domain).items()}
    found = set(contradictions(message, slots, vocabulary))
    for name, (words, lower_ok) in _NUMBER_WORDS.items():
        value = slots.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        for stated in _stated_numbers(message, words):
            if abs(stated - float(value)) < 1e-9 or (lower_ok and stated < float(value)):
                continue
            found.add(name)
    for name, value in slots.items():
        if isinstance(value, str) and _ID_SHAPE.match(value):
            shape = re.compile(rf"\b{value[0]}\d{{{len(value) - 1}}}\b")
            if any(m.group(0) != value for m in shape.finditer(message)):
                found.add(name)
    high = slots.get("high")
    if isinstance(high, str):
        for pattern in _PRIORITY:
            for match in pattern.finditer(message):
                if match.group(1).lower() != high.lower() and not _NEGATED.search(message[: match.start()]):
                    found.add("high")
    return sorted(found)
