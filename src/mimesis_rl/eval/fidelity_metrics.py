"""The fidelity metrics as pure functions over real and simulated user turns.

Every score is also mapped to [0, 1] (1 = like real users) so the Fidelity Index can combine them:

    FI = 100 * sum_i w_i * s_i / sum_i w_i

with the weights in params.yaml (`sim_eval.weights`) and the component scores s_i:
behaviour = 1 - JSD(real, simulated pattern distributions); turing = 1 - TD / 100;
distribution = 1 - JSD(k-means cluster histograms of embeddings); diversity = min(r, 1/r) with
r = distinct-2 of simulated openings / distinct-2 of real openings; goal = share of simulated
turns that contradict no goal slot; termination = F1 of "the user leaves here";
role = role-adherence rate * (1 - refusal rate); perplexity = 1 - ln(PPL) / ln(vocabulary size).
JSD uses log base 2, so it lies in [0, 1].
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from mimesis_rl.data.schema import PATTERN_NAMES

NONE_BUCKET = "(none)"
COMPONENTS = ("behaviour", "turing", "distribution", "diversity", "goal", "termination", "role", "perplexity")


def jsd(p: Sequence[float], q: Sequence[float]) -> float:
    """Jensen-Shannon divergence, base 2, of two (unnormalised) histograms; 0 = identical, 1 = disjoint."""
    p_arr = np.asarray(p, dtype=float)
    q_arr = np.asarray(q, dtype=float)
    if p_arr.sum() <= 0 or q_arr.sum() <= 0:
        return 1.0 if p_arr.sum() != q_arr.sum() else 0.0
    p_arr, q_arr = p_arr / p_arr.sum(), q_arr / q_arr.sum()
    m = (p_arr + q_arr) / 2

    def kl(a: np.ndarray, b: np.ndarray) -> float:
        mask = a > 0
        return float(np.sum(a[mask] * np.log2(a[mask] / b[mask])))

    return float(min(1.0, max(0.0, (kl(p_arr, m) + kl(q_arr, m)) / 2)))


def pattern_histogram(labels: Sequence[Sequence[str]]) -> list[float]:
    """Counts per pattern (PATTERN_NAMES order) plus a last bucket for turns that show none."""
    counts = Counter(p for turn in labels for p in turn)
    none = sum(1 for turn in labels if not turn)
    return [float(counts.get(name, 0)) for name in PATTERN_NAMES] + [float(none)]


def behaviour_fidelity(real: Sequence[Sequence[str]], simulated: Sequence[Sequence[str]]) -> float:
    return 1.0 - jsd(pattern_histogram(real), pattern_histogram(simulated))


def per_pattern_f1(real: Sequence[Sequence[str]],
                   simulated: Sequence[Sequence[str]]) -> dict[str, float | None]:
    """F1 of each pattern over context-matched turns (real labels the reference); None if absent in both."""
    out: dict[str, float | None] = {}
    for name in PATTERN_NAMES:
        tp = sum(1 for r, s in zip(real, simulated, strict=True) if name in r and name in s)
        fp = sum(1 for r, s in zip(real, simulated, strict=True) if name not in r and name in s)
        fn = sum(1 for r, s in zip(real, simulated, strict=True) if name in r and name not in s)
        out[name] = None if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)
    return out


def binary_f1(real: Sequence[bool], predicted: Sequence[bool]) -> float | None:
    tp = sum(1 for r, p in zip(real, predicted, strict=True) if r and p)
    fp = sum(1 for r, p in zip(real, predicted, strict=True) if not r and p)
    fn = sum(1 for r, p in zip(real, predicted, strict=True) if r and not p)
    return None if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def turing_distance(auc: float) -> float:
    """TD = 100 * |2 AUC - 1|: 0 when the discriminator cannot tell real from simulated."""
    return 100.0 * abs(2.0 * auc - 1.0)


def cluster_jsd(real: np.ndarray, simulated: np.ndarray, k: int = 8, seed: int = 0) -> float:
    """JSD between the k-means cluster histograms of real and simulated embeddings (fit on both)."""
    from sklearn.cluster import KMeans

    n = len(real) + len(simulated)
    k = max(2, min(k, n // 4)) if n >= 8 else 2
    if len(real) == 0 or len(simulated) == 0:
        return 1.0
    model = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(np.vstack([real, simulated]))
    hist_real = np.bincount(model.labels_[: len(real)], minlength=k)
    hist_sim = np.bincount(model.labels_[len(real):], minlength=k)
    return jsd(hist_real, hist_sim)


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    """Unique n-grams / all n-grams over the texts (lower-cased words); 0 when there are none."""
    grams: list[tuple[str, ...]] = []
    for text in texts:
        words = text.lower().split()
        grams.extend(tuple(words[i:i + n]) for i in range(len(words) - n + 1))
    return len(set(grams)) / len(grams) if grams else 0.0


def ratio_score(simulated: float, real: float) -> float:
    """min(r, 1/r) of two positive quantities: 1 when equal, towards 0 as they part."""
    if simulated <= 0 or real <= 0:
        return 1.0 if simulated == real else 0.0
    r = simulated / real
    return float(min(r, 1 / r))


def perplexity_score(perplexity: float | None, vocab_size: int) -> float | None:
    if perplexity is None or vocab_size < 2:
        return None
    return float(min(1.0, max(0.0, 1.0 - np.log(perplexity) / np.log(vocab_size))))


def fidelity_index(scores: Mapping[str, float | None], weights: Mapping[str, float]) -> float:
    """100 * weighted mean of the available component scores (missing ones drop out of both sums)."""
    unknown = sorted(set(weights) - set(COMPONENTS))
    if unknown:
        raise ValueError(f"sim_eval.weights: unknown component(s) {unknown}; known: {', '.join(COMPONENTS)}")
    num = den = 0.0
    for name, weight in weights.items():
        value = scores.get(name)
        if value is None or weight <= 0:
            continue
        num += weight * float(value)
        den += weight
    return 100.0 * num / den if den else 0.0
