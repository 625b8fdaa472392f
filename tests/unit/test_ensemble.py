"""Ensemble tuning on training probabilities: weights, thresholds, the rules OR, and persistence."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.ensemble import EnsembleLabeler, weight_grid
from mimesis_rl.data.schema import PATTERN_NAMES

N = len(PATTERN_NAMES)


class TableLabeler(Labeler):
    """A member whose probabilities are a fixed table indexed by the turn's text (a row number)."""

    def __init__(self, name: str, table: np.ndarray) -> None:
        super().__init__()
        self.name, self.table = name, table

    def predict_proba(self, contexts: Sequence[TurnInContext]) -> np.ndarray:
        return self.table[[int(c.text) for c in contexts]]


def test_weight_grid() -> None:
    assert weight_grid(1) == [(1.0,)]
    grid = weight_grid(2)
    assert (0.5, 0.5) in grid and (1.0, 0.0) in grid and len(grid) == 5
    assert all(abs(sum(w) - 1) < 1e-9 for w in weight_grid(3))


def test_fit_trusts_the_informative_member_and_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y = (rng.random((200, N)) < 0.3).astype(int)
    good = np.clip(y * 0.8 + rng.normal(0, 0.1, y.shape), 0, 1)  # informative
    noise = rng.random(y.shape)  # useless
    members = {"rules": TableLabeler("rules", noise), "embedding": TableLabeler("embedding", good)}
    ensemble = EnsembleLabeler.fit(members, {"rules": noise, "embedding": good}, y)
    assert (ensemble.weights[1] >= 0.75).all()  # embedding row
    assert not ensemble.or_rules.any()  # noisy rules are never trusted alone
    contexts = [TurnInContext(text=str(i)) for i in range(200)]
    assert (ensemble.predict(contexts) == y).mean() > 0.95

    path = ensemble.save(tmp_path / "ensemble.json")
    loaded = EnsembleLabeler.load(path, members)
    np.testing.assert_allclose(loaded.predict_proba(contexts), ensemble.predict_proba(contexts))


def test_precise_rules_are_ored_in() -> None:
    rng = np.random.default_rng(1)
    y = (rng.random((300, N)) < 0.3).astype(int)
    # rules: perfectly precise but catch only half the positives; embedding: weak
    rules = (y * (rng.random(y.shape) < 0.5)).astype(float)
    weak = np.clip(y * 0.3 + rng.random(y.shape) * 0.7, 0, 1)
    members = {"rules": TableLabeler("rules", rules), "embedding": TableLabeler("embedding", weak)}
    ensemble = EnsembleLabeler.fit(members, {"rules": rules, "embedding": weak}, y, min_rules_precision=0.85)
    contexts = [TurnInContext(text=str(i)) for i in range(300)]
    decisions = ensemble.predict(contexts)
    assert (decisions[rules >= 0.5] == 1).all()  # whatever the rules say passes
    probs = ensemble.predict_proba(contexts)
    assert (
        (probs >= ensemble.thresholds) == decisions.astype(bool)
    ).all()  # probabilities agree with decisions
