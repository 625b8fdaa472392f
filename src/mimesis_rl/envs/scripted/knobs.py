"""Behaviour knobs of scripted users, and the named presets built from them.

Why knobs rather than hand-written personas: every difficult behaviour a real user shows
(withholding, privacy, changing their mind, fragments, emotion, impatience, pushback) is one
dial, so panels can mix them and tables can say which dial made a task hard.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class Knobs:
    """How a scripted user behaves, domain-independently.

    Disclosure
        cooperativeness: chance to answer a direct question (otherwise `withholding_info`).
        disclosure: pace; chance per turn to volunteer a fact nobody asked for. 1.0 tells
            everything in the first message (the over-cooperative baseline).
        privacy: chance to decline a private fact when asked (`privacy_concern`); halved when
            the agent explains why it needs it.
    Dynamics
        intent_change: chance per episode to change a changeable goal slot mid-way.
        patience: agent messages the user sits through before leaving.
        pushback: chance to contest a proposal or ask for a justification.
        toughness: how hard the user bargains in negotiations (0 = soft, 1 = hard).
    Style
        verbosity: below 0.3 the user writes fragments and typos (`incomplete_utterance`);
            above 0.8 they add chatter.
        emotion: chance per turn to show feelings (`emotional_expression`).
    """

    cooperativeness: float = 1.0
    disclosure: float = 0.3
    privacy: float = 0.0
    intent_change: float = 0.0
    patience: int = 99
    pushback: float = 0.0
    toughness: float = 0.2
    verbosity: float = 0.6
    emotion: float = 0.05

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "patience":
                if not isinstance(value, int) or value < 1:
                    raise ValueError(f"knob patience must be an int >= 1, got {value!r}")
            elif not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"knob {f.name} must be in [0, 1], got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_(self, **changes: Any) -> Knobs:
        return replace(self, **changes)


PRESETS: dict[str, Knobs] = {
    # Training-side users.
    "cooperative": Knobs(),
    "train_mix": Knobs(
        cooperativeness=0.85,
        disclosure=0.3,
        privacy=0.3,
        intent_change=0.3,
        patience=10,
        pushback=0.2,
        toughness=0.4,
        verbosity=0.5,
        emotion=0.2,
    ),
    # Baseline: tells everything at once, agrees with everything.
    "tell_all": Knobs(disclosure=1.0, verbosity=0.9, toughness=0.0),
    # Unseen panel: one or two dials turned up each, and a few mixes.
    "terse": Knobs(cooperativeness=0.8, disclosure=0.05, verbosity=0.1, toughness=0.3),
    "private": Knobs(cooperativeness=0.9, disclosure=0.1, privacy=0.9, toughness=0.4),
    "fickle": Knobs(cooperativeness=0.9, disclosure=0.2, intent_change=0.9, verbosity=0.5, toughness=0.3),
    "impatient": Knobs(
        cooperativeness=0.8, disclosure=0.2, patience=4, emotion=0.7, verbosity=0.3, toughness=0.4
    ),
    "withholding": Knobs(cooperativeness=0.45, disclosure=0.0, privacy=0.5, toughness=0.5),
    "skeptic": Knobs(cooperativeness=0.7, disclosure=0.1, pushback=0.8, toughness=0.8),
    "emotional": Knobs(
        cooperativeness=0.8, disclosure=0.3, emotion=0.9, verbosity=0.9, patience=7, toughness=0.3
    ),
    "vague": Knobs(cooperativeness=0.6, disclosure=0.0, privacy=0.3, verbosity=0.4, toughness=0.4),
    "hard_bargainer": Knobs(
        cooperativeness=0.7, disclosure=0.0, privacy=0.7, pushback=0.6, toughness=1.0, patience=8
    ),
    "chaotic": Knobs(
        cooperativeness=0.5,
        disclosure=0.1,
        privacy=0.5,
        intent_change=0.6,
        patience=6,
        pushback=0.5,
        toughness=0.7,
        verbosity=0.2,
        emotion=0.5,
    ),
}


def preset(name: str) -> Knobs:
    """A named preset, with a clear error listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown scripted-user preset {name!r}; known: {', '.join(PRESETS)}") from None
