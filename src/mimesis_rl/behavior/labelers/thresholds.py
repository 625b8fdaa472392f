"""Choosing a decision threshold per pattern from scores and labels (training data only)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.metrics import f1_score


def best_threshold(
    y: np.ndarray, scores: np.ndarray, grid: Sequence[float] | None = None
) -> tuple[float, float]:
    """(threshold, F1) maximising F1 of `scores >= threshold`; ties go to the threshold closest to 0.5."""
    grid = grid if grid is not None else np.round(np.arange(0.05, 0.951, 0.025), 3)
    best = (0.5, -1.0)
    for t in grid:
        f = f1_score(y, (scores >= t).astype(int), zero_division=0)
        if f > best[1] + 1e-9 or (abs(f - best[1]) <= 1e-9 and abs(t - 0.5) < abs(best[0] - 0.5)):
            best = (float(t), float(f))
    return best
