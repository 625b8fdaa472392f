"""The one labeler interface: `label(conversations)` -> per user turn, the patterns and their probabilities.

A labeler implements `predict_proba(contexts)`, an (n, 13) array of probabilities in
PATTERN_NAMES order; this base turns them into decisions with per-pattern thresholds and offers
the same thing in the shapes the rest of the project asks for (conversations, gold items, and the
simulator reward's `PatternPredictor`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mimesis_rl.behavior.context import TurnInContext, dialogue_context, user_turn_contexts
from mimesis_rl.data.schema import PATTERN_NAMES, Conversation, Turn

N_PATTERNS = len(PATTERN_NAMES)


@dataclass(frozen=True)
class TurnLabels:
    """The labels of one user turn: `turn_index` counts all turns of its conversation from 0."""

    turn_index: int
    patterns: tuple[str, ...]
    probabilities: dict[str, float]


def thresholds_array(thresholds: float | Mapping[str, float] | Sequence[float] | np.ndarray) -> np.ndarray:
    """A (13,) threshold vector from one number, a name -> value mapping (others 0.5) or a sequence."""
    if isinstance(thresholds, int | float):
        return np.full(N_PATTERNS, float(thresholds))
    if isinstance(thresholds, Mapping):
        unknown = sorted(set(thresholds) - set(PATTERN_NAMES))
        if unknown:
            raise ValueError(f"thresholds for unknown patterns {unknown}")
        return np.array([float(thresholds.get(name, 0.5)) for name in PATTERN_NAMES])
    arr = np.asarray(thresholds, dtype=float)
    if arr.shape != (N_PATTERNS,):
        raise ValueError(f"expected {N_PATTERNS} thresholds, got shape {arr.shape}")
    return arr


class Labeler(ABC):
    """Subclasses set `name` and implement `predict_proba`; `thresholds` holds one cut-off per pattern."""

    name: str = "labeler"

    def __init__(self, thresholds: float | Mapping[str, float] | Sequence[float] | np.ndarray = 0.5) -> None:
        self.thresholds = thresholds_array(thresholds)

    @abstractmethod
    def predict_proba(self, contexts: Sequence[TurnInContext]) -> np.ndarray:
        """(len(contexts), 13) probabilities in PATTERN_NAMES order."""

    def decide(self, probs: np.ndarray) -> np.ndarray:
        """0/1 decisions from probabilities and the per-pattern thresholds."""
        return (np.asarray(probs) >= self.thresholds[None, :]).astype(np.int64)

    def predict(self, contexts: Sequence[TurnInContext]) -> np.ndarray:
        return self.decide(self.predict_proba(contexts)) if contexts else np.zeros((0, N_PATTERNS), np.int64)

    def label_contexts(
        self, contexts: Sequence[TurnInContext]
    ) -> list[tuple[tuple[str, ...], dict[str, float]]]:
        """(patterns, probabilities) for each context."""
        if not contexts:
            return []
        probs = self.predict_proba(contexts)
        decisions = self.decide(probs)
        out = []
        for row, dec in zip(probs, decisions, strict=True):
            names = tuple(name for name, d in zip(PATTERN_NAMES, dec, strict=True) if d)
            out.append(
                (names, {name: round(float(p), 4) for name, p in zip(PATTERN_NAMES, row, strict=True)})
            )
        return out

    def label(self, conversations: Sequence[Conversation]) -> list[list[TurnLabels]]:
        """For each conversation, the labels of each of its user turns (all turns scored in one batch)."""
        indexed = [user_turn_contexts(conv) for conv in conversations]
        flat = [ctx for per_conv in indexed for _, ctx in per_conv]
        results = iter(self.label_contexts(flat))
        out: list[list[TurnLabels]] = []
        for per_conv in indexed:
            rows = []
            for index, _ in per_conv:
                names, probs = next(results)
                rows.append(TurnLabels(index, names, probs))
            out.append(rows)
        return out

    def predict_dialogues(self, dialogues: Sequence[Sequence[Turn]]) -> list[dict[str, float]]:
        """The simulator reward's `PatternPredictor`: pattern -> probability of each dialogue's last turn."""
        contexts = [dialogue_context(d, where=f"dialogue {i}") for i, d in enumerate(dialogues)]
        if not contexts:
            return []
        probs = self.predict_proba(contexts)
        return [{name: float(p) for name, p in zip(PATTERN_NAMES, row, strict=True)} for row in probs]

    def close(self) -> None:  # noqa: B027 - optional hook, most labelers hold nothing
        """Release connections or models; a no-op unless a labeler holds any."""
