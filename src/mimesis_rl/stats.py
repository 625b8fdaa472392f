"""Bootstrap intervals and paired differences: the statistics every evaluation shares.

The bottom layer: it imports numpy and nothing of the project, so the labeller's scores
(`behavior`), the agent's before/after gain (`agent.evaluate`), the fidelity table and the
generalisation matrix (`eval`) all draw their intervals the same way.

Two kinds of resampling, for two kinds of data:

- grouped (`conversation_bootstrap`, `dialogue_interval`): turns of one conversation are not
  independent, so whole conversations are drawn together; the same ids and seed give the same
  resamples, so two statistics computed this way are paired;
- paired (`paired_difference`): two agents that met the same dialogues are compared on matched
  pairs, resampling pairs (within strata when every stratum must weigh the same), not two samples.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


def bootstrap_mean(values: Sequence[float], n_boot: int, confidence: float, seed: int = 0) -> list[float]:
    """Percentile interval of the mean (resampling the values)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return [math.nan, math.nan]
    if len(x) == 1 or np.all(x == x[0]):
        return [float(x.mean()), float(x.mean())]
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return [float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))]


def paired_difference(a: Mapping[Any, float], b: Mapping[Any, float], n_boot: int, confidence: float,
                      seed: int = 0, strata: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """Mean of a[k] - b[k] over the keys both have, with a paired bootstrap interval.

    With `strata`, the statistic is the mean over strata of each stratum's mean difference and
    the bootstrap resamples pairs within each stratum (every unseen simulator weighs the same).
    """
    keys = sorted(set(a) & set(b), key=repr)
    if not keys:
        return {"diff": None, "ci": None, "pairs": 0}
    groups: dict[Any, list[float]] = defaultdict(list)
    for k in keys:
        groups[strata(k) if strata else 0].append(float(a[k]) - float(b[k]))
    arrays = [np.asarray(v) for v in groups.values()]
    point = float(np.mean([d.mean() for d in arrays]))
    rng = np.random.default_rng(seed)
    boots = np.zeros(n_boot)
    for d in arrays:
        boots += d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    boots /= len(arrays)
    alpha = (1 - confidence) / 2
    ci = [float(np.quantile(boots, alpha)), float(np.quantile(boots, 1 - alpha))]
    return {"diff": point, "ci": ci, "pairs": len(keys)}


def stratified_rate_difference(strata: Mapping[Any, Sequence[int]], n_boot: int = 2000,
                               confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """hits_a/n_a − hits_b/n_b within each stratum (`(hits_a, n_a, hits_b, n_b)`), combined with the
    Mantel-Haenszel weights n_a·n_b/(n_a+n_b), with a bootstrap interval resampling each stratum's two
    shares. Why: pooled over strata, a difference can come from where the samples fall alone (a user
    that says yes in one domain and no in another reads as telling a and b apart when one domain holds
    most of a and the other most of b). Strata with an empty side carry no weight and are listed."""
    used = {k: tuple(int(x) for x in v) for k, v in strata.items() if v[1] and v[3]}
    if not used:
        return {"diff": None, "ci": None, "strata": [], "left_out": sorted(map(str, strata))}
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    diff = weights = 0.0
    for hits_a, n_a, hits_b, n_b in used.values():
        weight = n_a * n_b / (n_a + n_b)
        diff += weight * (hits_a / n_a - hits_b / n_b)
        weights += weight
        total += weight * (rng.binomial(n_a, hits_a / n_a, n_boot) / n_a
                           - rng.binomial(n_b, hits_b / n_b, n_boot) / n_b)
    alpha = (1 - confidence) / 2
    boots = total / weights
    ci = [float(np.quantile(boots, alpha)), float(np.quantile(boots, 1 - alpha))]
    return {"diff": diff / weights, "ci": ci,
            "strata": sorted(map(str, used)), "left_out": sorted(str(k) for k in strata if k not in used)}


def interval_verdict(ci: Sequence[float] | None, higher_is_better: bool = True) -> str:
    """`holds` when the whole interval is on the good side of 0, `does not hold` when it is wholly on
    the bad side, `within noise` when it contains 0 (and `not measured` without an interval)."""
    if ci is None or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in ci):
        return "not measured"
    lo, hi = (ci[0], ci[1]) if higher_is_better else (-ci[1], -ci[0])
    if lo > 0:
        return "holds"
    if hi < 0:
        return "does not hold"
    return "within noise"


def conversation_bootstrap(conversation_ids: Sequence[str], statistic: Callable[[np.ndarray], float],
                           seed: int = 0, resamples: int = 300,
                           order: Sequence[str] | None = None) -> list[float]:
    """95% interval of `statistic(row indices)` over resamples of whole conversations (with replacement):
    turns of one conversation are not independent, so they are drawn together. `order` fixes which
    conversation each drawn number stands for (default: first appearance)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, cid in enumerate(conversation_ids):
        groups[cid].append(i)
    members = [np.asarray(groups[cid]) for cid in (order or list(groups))]
    rng = np.random.default_rng(seed)
    spread = [statistic(np.concatenate([members[j] for j in rng.integers(0, len(members), len(members))]))
              for _ in range(resamples)]
    low, high = np.percentile(spread, [2.5, 97.5])
    return [float(low), float(high)]


def dialogue_interval(
    dialogues: Sequence[str], statistic: Callable[[np.ndarray], float], resamples: int = 1000, seed: int = 0
) -> list[float] | None:
    """95% bootstrap interval of `statistic(rows)` over resampled dialogues (turns of one dialogue are
    drawn together); the same seed and dialogues give the same resamples, so two statistics computed
    this way are paired. None with fewer than two dialogues."""
    if len(set(dialogues)) < 2:
        return None
    return conversation_bootstrap(list(dialogues), statistic, seed, resamples, order=sorted(set(dialogues)))
