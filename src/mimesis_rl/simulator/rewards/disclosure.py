"""Paced disclosure: real users reveal private facts late, one at a time, if at all.

Penalises the over-cooperation the paper fights: private slots in the very first message, every
private slot in one message, and dumping the whole goal card at once.
"""

from __future__ import annotations

import json
from typing import Any

from mimesis_rl.simulator.rewards.common import RewardFunc, column, named, parse_completions
from mimesis_rl.simulator.rewards.slots import load_slots, revealed_slots


def disclosure_score(message: str, slots: dict[str, Any], private: list[str], user_turn_number: int,
                     already_revealed: list[str] = ()) -> float:
    """1.0 for paced disclosure, down to 0.0 for telling everything in the first message."""
    fresh_private = [k for k in revealed_slots(slots, message, private) if k not in already_revealed]
    score = 1.0
    if fresh_private and user_turn_number == 0:
        score -= 0.5 + 0.5 * len(fresh_private) / len(private)
    elif len(private) >= 2 and len(fresh_private) == len(private):
        score -= 0.7  # every private slot in one message
    elif len(fresh_private) >= 2:
        score -= 0.3 * (len(fresh_private) - 1) / (len(private) - 1)
    everything = revealed_slots(slots, message)
    if user_turn_number == 0 and len(slots) >= 3 and len(everything) == len(slots):
        score -= 0.3  # the whole card in the opening message
    return max(0.0, score)


def _names(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return list(json.loads(value))
    return list(value)


def make_paced_disclosure_reward() -> RewardFunc:
    @named("paced_disclosure")
    def paced_disclosure(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        parsed = parse_completions(completions)
        n = len(parsed)
        rows = zip(parsed, column(kwargs, "goal_slots", n), column(kwargs, "private_slots", n),
                   column(kwargs, "user_turn_number", n, 0), column(kwargs, "revealed", n), strict=True)
        out: list[float | None] = []
        for turn, raw_slots, raw_private, number, raw_revealed in rows:
            slots = load_slots(raw_slots)
            private = [k for k in _names(raw_private) if k in slots]
            if not private and len(slots) < 3:
                out.append(None)
            elif not turn.ok:
                out.append(0.0)
            else:
                out.append(disclosure_score(turn.message, slots, private, int(number or 0),
                                            _names(raw_revealed)))
        return out

    return paced_disclosure
