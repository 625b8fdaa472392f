"""When a simulated user leaves: a small hazard model learned from real conversations.

A 135M simulator trained for a few dozen steps almost never samples its end marker (0.8% of
held-out turns against 14-20% real), and its own probability of the marker ranks the turns where
real users left *below* the others (AUC 0.40 on validation turns). So leaving is learned apart:
a logistic regression over what the user just wrote, the agent message it answers, how far into
the conversation it is and the card's domain, fitted on the training conversations (the corpus
and the environment dialogues the SFT also sees). `UserSimulator` asks it after every valid
turn that did not already end, and draws the decision with a per-row seed, so a population of
simulated users leaves at the rate and at the kind of turns real users do, the same way for the
same episode seed whichever agent it meets.

Stored as `leave.json` in the simulator folder: plain weights, read without scikit-learn.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.data.schema import Conversation
from mimesis_rl.fsutil import write_json
from mimesis_rl.simulator.dialogue import user_left
from mimesis_rl.simulator.format import OPENING_CUE

FILE = "leave.json"
VERSION = 1
_WORD = re.compile(r"[a-z0-9']+|[!?]")
_TURN_BINS = (0, 1, 2, 3, 5, 8, 12, 20)
_LENGTH_BINS = (2, 5, 10, 20)


@dataclass(frozen=True)
class LeaveSettings:
    """`sim_sft.leave`: fit the hazard model (enabled), its L2 strength (c: inverse, as in
    scikit-learn) and the fewest training turns a word needs to get a weight (min_count)."""

    enabled: bool = True
    c: float = 0.1
    min_count: int = 3

    def __post_init__(self) -> None:
        if self.c <= 0:
            raise ValueError(f"sim_sft.leave.c must be > 0, got {self.c}")
        if self.min_count < 1:
            raise ValueError(f"sim_sft.leave.min_count must be >= 1, got {self.min_count}")


def _bin(value: int, bins: Sequence[int]) -> str:
    return next((str(b) for b in bins if value <= b), f">{bins[-1]}")


def features(message: str, incoming: str, turn_number: int, domain: str | None) -> list[str]:
    """The sparse binary features of one user turn (names, so weights can be stored as a dict)."""
    words = _WORD.findall(message.lower())
    out = {f"u:{w}" for w in words}
    if incoming and incoming != OPENING_CUE:
        out |= {f"a:{w}" for w in _WORD.findall(incoming.lower())}
    out.add(f"n:{_bin(turn_number, _TURN_BINS)}")
    out.add(f"len:{_bin(len(words), _LENGTH_BINS)}")
    out.add(f"d:{domain or '?'}")
    return sorted(out)


@dataclass(frozen=True)
class TurnCase:
    """One real user turn after the opening, and whether the user left with it."""

    features: list[str]
    left: bool
    domain: str


def turn_cases(conversations: Iterable[Conversation]) -> list[TurnCase]:
    """Every user turn but the first of each conversation (no real user leaves at its opening).

    An environment dialogue that ended because the user accepted an offer ended by the
    environment's rule, not by the user leaving: its last user turn is no case either way."""
    out = []
    for conv in conversations:
        number = -1
        accepted = (conv.outcome or {}).get("end_reason") == "accepted"
        for i, turn in enumerate(conv.turns):
            if turn.role != "user":
                continue
            number += 1
            if number == 0 or (accepted and i == len(conv.turns) - 1):
                continue
            incoming = conv.turns[i - 1].content if i > 0 and conv.turns[i - 1].role == "assistant" else ""
            out.append(TurnCase(features(turn.content, incoming, number, conv.domain),
                                user_left(conv, i), conv.domain))
    return out


@dataclass
class LeaveModel:
    """P(the user leaves with this turn) = sigmoid(bias + sum of the weights of its features)."""

    weights: dict[str, float]
    bias: float
    info: dict[str, Any] = field(default_factory=dict)  # what it was fitted on, and how well it ranks

    def probability(self, message: str, incoming: str, turn_number: int, domain: str | None) -> float:
        """0 at the opening (turn 0): nobody opens a chat only to leave it."""
        return self.score(features(message, incoming, turn_number, domain)) if turn_number > 0 else 0.0

    def score(self, names: Iterable[str]) -> float:
        z = self.bias + sum(self.weights.get(f, 0.0) for f in names)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def save(self, path: str | Path) -> None:
        write_json(Path(path), {"version": VERSION, "bias": self.bias, "weights": self.weights,
                                "info": self.info})

    @classmethod
    def load(cls, path: str | Path) -> LeaveModel:
        data = json.loads(Path(path).read_text())
        if data.get("version") != VERSION:
            raise ValueError(f"{path}: leave model version {data.get('version')!r}, "
                             f"this code reads {VERSION}")
        return cls(weights={k: float(v) for k, v in data["weights"].items()}, bias=float(data["bias"]),
                   info=dict(data.get("info") or {}))


def fit_leave_model(train: Sequence[Conversation], val: Sequence[Conversation] = (),
                    settings: LeaveSettings = LeaveSettings()) -> LeaveModel | None:
    """Fit on the training conversations; report ranking (AUC) and calibration on validation ones.
    None when the training turns hold no leave (or nothing else) to learn from."""
    import numpy as np
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    cases = turn_cases(train)
    labels = np.array([c.left for c in cases], dtype=bool)
    if len(cases) < 2 or labels.all() or not labels.any():
        return None
    vectorizer = CountVectorizer(analyzer=lambda names: names, binary=True,
                                 min_df=min(settings.min_count, len(cases)))
    matrix = vectorizer.fit_transform([c.features for c in cases])
    fitted = LogisticRegression(C=settings.c, max_iter=3000).fit(matrix, labels)
    names = vectorizer.get_feature_names_out()
    weights = {str(n): round(float(w), 5) for n, w in zip(names, fitted.coef_[0], strict=True)
               if abs(w) >= 1e-4}
    model = LeaveModel(weights=weights, bias=float(fitted.intercept_[0]))
    info: dict[str, Any] = {"train_turns": len(cases), "train_leave_rate": float(labels.mean()),
                            "features": len(weights), "c": settings.c, "min_count": settings.min_count,
                            "train_leave_rate_by_domain": _rates(cases)}
    held = turn_cases(val)
    if held:
        truth = np.array([c.left for c in held], dtype=bool)
        predicted = np.array([model.score(c.features) for c in held])
        info.update({"val_turns": len(held), "val_leave_rate": float(truth.mean()),
                     "val_mean_probability": float(predicted.mean())})
        if truth.any() and not truth.all():
            info["val_auc"] = float(roc_auc_score(truth, predicted))
    model.info = info
    return model


def _rates(cases: Sequence[TurnCase]) -> dict[str, float]:
    by: dict[str, list[bool]] = {}
    for c in cases:
        by.setdefault(c.domain, []).append(c.left)
    return {d: sum(v) / len(v) for d, v in sorted(by.items())}


def uniform(*parts: object) -> float:
    """A stable draw in [0, 1) from any parts: the leave decision's per-row randomness."""
    from mimesis_rl.models.inference.runner import derive_seed

    return derive_seed(*parts) / 2**63


def leave_info(model: LeaveModel | None) -> Mapping[str, Any]:
    """What the simulator manifest records of its leave model."""
    return {"file": FILE, **model.info} if model is not None else {}
