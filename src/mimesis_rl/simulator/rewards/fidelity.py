"""Pattern fidelity: the behaviour patterns of the generated message against the real next turn's.

A labeler (mimesis_rl.behavior) reads the generated message in its dialogue context; the reward is
the soft Jaccard similarity between its pattern probabilities p (those under NOISE_FLOOR count as
0, so a calibrated labeler's small probabilities do not swamp the denominator) and the real turn's
pattern set r: sum(min(p, r)) / sum(max(p, r)). When the real turn shows no pattern, the reward is
1 - max(p): a plain turn is matched by a plain turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mimesis_rl.data.schema import PATTERN_NAMES, Turn
from mimesis_rl.simulator.dialogue import unflip
from mimesis_rl.simulator.rewards.common import RewardFunc, column, named, parse_completions

# Given dialogues whose last turn is the user turn to judge: pattern -> probability for that turn.
PatternPredictor = Callable[[list[list[Turn]]], list[Mapping[str, float]]]


NOISE_FLOOR = 0.2


def soft_jaccard(predicted: Mapping[str, float], real: Sequence[str]) -> float:
    real_set = set(real)
    if not real_set:
        return 1.0 - max((float(predicted.get(name, 0.0)) for name in PATTERN_NAMES), default=0.0)
    num = den = 0.0
    for name in PATTERN_NAMES:
        p = float(predicted.get(name, 0.0))
        p = p if p >= NOISE_FLOOR else 0.0
        r = 1.0 if name in real_set else 0.0
        num += min(p, r)
        den += max(p, r)
    return 1.0 if den < 1e-9 else num / den


def _patterns(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return list(json.loads(value))
    return list(value)


def make_pattern_fidelity_reward(predictor: PatternPredictor) -> RewardFunc:
    """Rows without a real next turn (environment goal cards) get None; rejected outputs 0. With text
    prompts (rendered chat template), the dialogue comes from the `context` column (JSON messages)."""

    @named("pattern_fidelity")
    def pattern_fidelity(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        parsed = parse_completions(completions)
        reals = [_patterns(v) for v in column(kwargs, "real_patterns", len(parsed))]
        out: list[float | None] = [None if real is None else 0.0 for real in reals]
        todo = [i for i, (t, real) in enumerate(zip(parsed, reals, strict=True)) if t.ok and real is not None]
        if not todo:
            return out
        contexts = column(kwargs, "context", len(parsed))  # the message list behind a text prompt
        dialogues = []
        for i in todo:
            messages = prompts[i] if not isinstance(prompts[i], str) else json.loads(contexts[i] or "[]")
            history = unflip(messages)
            dialogues.append([*history, Turn(role="user", content=parsed[i].message)])
        for i, probs in zip(todo, predictor(dialogues), strict=True):
            out[i] = soft_jaccard(probs, reals[i])
        return out

    return pattern_fidelity
