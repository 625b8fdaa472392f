"""Choosing a decision threshold per pattern from scores and labels (training data only)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_GRID = np.round(np.arange(0.05, 0.951, 0.025), 3)


def f1_per_threshold(y: np.ndarray, scores: np.ndarray, grid: Sequence[float] | np.ndarray) -> np.ndarray:
    """F1 of `scores >= t` for every t of the grid at once (0 where nothing is predicted or true)."""
    y = np.asarray(y).astype(bool)
    pred = np.asarray(scores)[None, :] >= np.asarray(grid, dtype=float)[:, None]
    tp = (pred & y[None, :]).sum(1)
    denominator = pred.sum(1) + y.sum()
    return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)


def best_threshold(
    y: np.ndarray, scores: np.ndarray, grid: Sequence[float] | np.ndarray | None = None
) -> tuple[float, float]:
    """(threshold, F1) maximising F1 of `scores >= threshold`; ties go to the threshold closest to 0.5."""
    grid = np.asarray(DEFAULT_GRID if grid is None else grid, dtype=float)
    f1 = f1_per_threshold(y, scores, grid)
    best = f1.max()
    ties = np.flatnonzero(f1 >= best - 1e-9)
    pick = ties[np.argmin(np.abs(grid[ties] - 0.5))]
    return float(grid[pick]), float(f1[pick])
