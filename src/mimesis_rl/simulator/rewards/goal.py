"""Goal consistency: the simulated user never states something that contradicts its goal card.

A contradiction is an affirmative mention of another value that the same slot takes in other
goal cards (the vocabulary comes from the training prompts and the environments), or a number
stated next to the slot's name that differs from the slot's value ("my budget is 300" when
the card says 120). Values that are true for another slot of the same card never count, so
"firewood" is not a contradiction of `high: water` when the card also says `low: firewood`.
Semantic contradictions a word match cannot see ("I mostly need food" when food ranks second) are
out of reach here; the environments' verifiers judge those outcomes.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from mimesis_rl.simulator.rewards.common import RewardFunc, column, named, parse_completions
from mimesis_rl.simulator.rewards.slots import load_slots, mentions, numbers_in, slot_values

_NEGATION = re.compile(r"\b(not|no|don'?t|doesn'?t|never|without|instead of|rather than|except|nor|isn'?t|"
                       r"aren'?t|won'?t|can'?t)\W+(?:\w+\W+){0,2}$", re.IGNORECASE)


def slot_vocabulary(cards: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """slot name -> every non-numeric surface value it takes across the given slot dicts."""
    vocab: dict[str, set[str]] = defaultdict(set)
    for slots in cards:
        for name, value in slots.items():
            for form in slot_values(value):
                if not _is_number(form):
                    vocab[name].add(form.lower())
    return dict(vocab)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _affirmed(form: str, text: str) -> bool:
    for match in re.finditer(rf"(?<!\w){re.escape(form)}(?!\w)", text, re.IGNORECASE):
        if not _NEGATION.search(text[: match.start()]):
            return True
    return False


def contradictions(message: str, slots: Mapping[str, Any], vocabulary: Mapping[str, set[str]]) -> list[str]:
    """Names of the slots the message contradicts."""
    true_forms = {f.lower() for value in slots.values() for f in slot_values(value)}
    found = []
    for name, value in slots.items():
        forms = slot_values(value)
        numeric = [float(f) for f in forms if _is_number(f)]
        if numeric:
            label = re.escape(name.replace("_", " "))
            after = rf"\b{label}\b(?:\W+\w+){{0,3}}?\W+\$?\d+(?:\.\d+)?"  # "budget is 300"
            before = rf"\$?\d+(?:\.\d+)?\s+(?:\w+\s+)?{label}\b"  # "3 nights"
            for match in re.finditer(f"{after}|{before}", message, re.IGNORECASE):
                stated = numbers_in(match.group(0))
                if stated and all(abs(stated[-1] - n) > 1e-9 for n in numeric):
                    found.append(name)
                    break
            continue
        if mentions(value, message):
            continue  # the true value is there; other words may be comparisons
        alternatives = vocabulary.get(name, set()) - true_forms
        if any(_affirmed(alt, message) for alt in alternatives):
            found.append(name)
    return found


def make_goal_consistency_reward(vocabulary: Mapping[str, set[str]]) -> RewardFunc:
    """1.0 when the message contradicts no slot, 0.0 when it does; None without slots."""

    @named("goal_consistency")
    def goal_consistency(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        parsed = parse_completions(completions)
        cards = column(kwargs, "goal_slots", len(parsed))
        out: list[float | None] = []
        for turn, raw_slots in zip(parsed, cards, strict=True):
            slots = load_slots(raw_slots)
            if not slots:
                out.append(None)
            elif not turn.ok:
                out.append(0.0)
            else:
                out.append(0.0 if contradictions(turn.message, slots, vocabulary) else 1.0)
        return out

    return goal_consistency
