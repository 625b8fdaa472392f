"""Seeded per-row sampling that reads a few hundred logits per row instead of the whole vocabulary.

Why: HF's `TopPLogitsWarper` sorts the whole 49k vocabulary of every row at every step, and the
Gumbel-max draw took 49k exponentials from each row's generator: together ~70 of a sampled step's
~186 ms on SmolLM2. Here each row takes its `PREFILTER` largest logits (`topk`, no full sort),
cuts top-k/top-p among those, and picks the argmax of `logit + Gumbel noise` over the nucleus.
When the nucleus does not fit in the prefilter (a flat distribution: top_p of the mass lies beyond
the first `PREFILTER` tokens), that row alone falls back to the whole vocabulary. Without top-k or
top-p (sim_rl's and agent_rl's sampling) every token is a candidate and the draw skips the sort. The
distribution is the usual temperature -> top-k -> top-p one.

The noise of token t at step s of a row is a hash of (row seed, s, t) (splitmix64), not a draw
from a stream, so
- a row's tokens depend on its own seed only, whatever else shares the batch or leaves it;
- noise exists for exactly the candidates looked at (no 49k draws);
- as with Gumbel-max over a fixed noise vector, forbidding tokens other than the winner (the tag
  guard) leaves the sample unchanged: the guard perturbs nothing it does not have to.
`reference_sample` is the plain full-vocabulary version kept beside it for the equivalence tests.
"""

from __future__ import annotations

import numpy as np
import torch

PREFILTER = 256  # logits per row looked at before the nucleus is known to fit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wrapping arithmetic): a well-spread 64-bit hash."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def gumbel_noise(seeds: np.ndarray, steps: np.ndarray | int, tokens: torch.Tensor) -> torch.Tensor:
    """(rows, n) Gumbel(0, 1) noise for token ids `tokens` (rows, n): row i keyed by seeds[i], steps[i]."""
    with np.errstate(over="ignore"):
        step = np.broadcast_to(np.asarray(steps, dtype=np.uint64), seeds.shape)
        keys = _mix(seeds.astype(np.uint64) ^ _mix(step * _GOLDEN + _GOLDEN))
        ids = tokens.cpu().numpy().astype(np.uint64)
        bits = _mix(keys[:, None] + (ids + np.uint64(1)) * _GOLDEN)
    u = ((bits >> np.uint64(11)).astype(np.float64) + 0.5) / float(2**53)  # in (0, 1)
    return torch.from_numpy(-np.log(-np.log(u))).to(dtype=torch.float32, device=tokens.device)


def sample_rows(scores: torch.Tensor, seeds: np.ndarray, steps: np.ndarray | int, top_k: int = 0,
                top_p: float = 1.0) -> torch.Tensor:
    """One token id per row of (rows, vocab) fp32 *tempered* scores (-inf = forbidden); row i's noise
    is keyed by (seeds[i], steps[i]) only."""
    seeds = np.asarray(seeds, dtype=np.uint64)
    if top_k <= 0 and top_p >= 1.0:
        # Every allowed token is a candidate: Gumbel-max over the whole row needs no sort (the sort was
        # ~70% of the full-vocabulary draw); same candidates, same noise, so the same token.
        tokens = torch.arange(scores.shape[-1], device=scores.device).expand(scores.shape[0], -1)
        return (scores + gumbel_noise(seeds, steps, tokens)).argmax(dim=-1)
    k = min(top_k if top_k > 0 else PREFILTER, scores.shape[-1])
    values, index = scores.topk(k, dim=-1)  # sorted, largest first
    if top_k > 0:  # top-k renormalises over its k tokens, as TopKLogitsWarper does
        probs = torch.softmax(values, dim=-1)
        fits = torch.ones(len(values), dtype=torch.bool, device=scores.device)
    else:  # a prefilter: probabilities are shares of the whole vocabulary
        probs = torch.exp(values - torch.logsumexp(scores, dim=-1, keepdim=True))
        fits = probs.sum(dim=-1) >= top_p
    chosen = _pick(values, index, _nucleus(probs, top_p), seeds, steps)
    if not bool(fits.all()):
        rows = (~fits).nonzero().squeeze(1)
        picked = rows.cpu().numpy()
        row_steps = np.broadcast_to(np.asarray(steps, dtype=np.uint64), seeds.shape)[picked]
        chosen[rows] = reference_sample(scores[rows], seeds[picked], row_steps, top_p=top_p)
    return chosen


def _nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Which of the (sorted, largest first) tokens top-p keeps: those with the mass before them below
    top_p (the first always), and never a forbidden (zero-probability) one."""
    keep = probs > 0
    keep[:, 0] = True
    if top_p < 1.0:
        keep &= (probs.cumsum(dim=-1) - probs) < top_p
    return keep


def _pick(values: torch.Tensor, index: torch.Tensor, keep: torch.Tensor, seeds: np.ndarray,
          step: np.ndarray | int) -> torch.Tensor:
    """argmax over the kept candidates of (logit + the candidate token's Gumbel noise)."""
    noisy = values + gumbel_noise(seeds, step, index)
    noisy = noisy.masked_fill(~keep, float("-inf"))
    return index.gather(1, noisy.argmax(dim=-1, keepdim=True)).squeeze(1)


def reference_sample(scores: torch.Tensor, seeds: np.ndarray, step: np.ndarray | int, top_k: int = 0,
                     top_p: float = 1.0) -> torch.Tensor:
    """The plain version: sort the whole (tempered) vocabulary, cut top-k and top-p, Gumbel-max."""
    values, index = scores.sort(dim=-1, descending=True)
    if top_k > 0:
        values, index = values[:, :top_k], index[:, :top_k]
    keep = _nucleus(torch.softmax(values, dim=-1), top_p)
    width = int(keep.sum(dim=-1).max())  # noise only for the candidates some row keeps
    return _pick(values[:, :width], index[:, :width], keep[:, :width], seeds, step)
