"""The `ensemble` labeler: a per-pattern weighted mean of its members' probabilities, plus an OR with the
rules for the patterns where the rules are precise enough to trust alone.

Weights, thresholds and the OR switches are chosen per pattern on the training split only, from
held-out probabilities of the trained members (the embedding labeler's out-of-source predictions)
and the plain scores of the untrained ones (rules, llm). A member is not trusted where it was not
validated: the rules may switch a pattern on alone only when they are precise on *every* training
source where they fire, and the weights are fitted on predictions for sources the trained member
had not seen. The result is a small JSON file.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.thresholds import best_threshold
from mimesis_rl.data.schema import PATTERN_NAMES
from mimesis_rl.fsutil import write_json

WEIGHT_STEP = 0.25


def weight_grid(n_members: int, step: float = WEIGHT_STEP) -> list[tuple[float, ...]]:
    """All weight vectors on the simplex with the given step (e.g. (1, 0), (0.75, 0.25), ... for two)."""
    ticks = int(round(1 / step))
    out = []
    for combo in itertools.product(range(ticks + 1), repeat=n_members):
        if sum(combo) == ticks:
            out.append(tuple(c / ticks for c in combo))
    return out


class EnsembleLabeler(Labeler):
    name = "ensemble"

    def __init__(
        self,
        members: Mapping[str, Labeler],
        weights: np.ndarray,
        thresholds: Sequence[float],
        or_rules: Sequence[bool],
        rules_threshold: float = 0.5,
    ) -> None:
        super().__init__(np.asarray(thresholds, dtype=float))
        self.members = dict(members)
        self.weights = np.asarray(weights, dtype=float)
        if self.weights.shape != (len(self.members), len(PATTERN_NAMES)):
            raise ValueError(
                f"weights must be (members, patterns) = ({len(self.members)}, {len(PATTERN_NAMES)})"
            )
        self.or_rules = np.asarray(or_rules, dtype=bool)
        if self.or_rules.any() and "rules" not in self.members:
            raise ValueError("or_rules needs a `rules` member")
        self.rules_threshold = float(rules_threshold)

    def member_probs(self, contexts: Sequence[TurnInContext]) -> dict[str, np.ndarray]:
        """Each member's probabilities; the rules run once and their scores feed the embedding member."""
        from mimesis_rl.behavior.labelers.embedding import EmbeddingLabeler

        probs: dict[str, np.ndarray] = {}
        if "rules" in self.members:
            probs["rules"] = self.members["rules"].predict_proba(contexts)
        for name, member in self.members.items():
            if name in probs:
                continue
            if isinstance(member, EmbeddingLabeler) and "rules" in probs:
                probs[name] = member.predict_proba(contexts, cue_probs=probs["rules"])
            else:
                probs[name] = member.predict_proba(contexts)
        return probs

    def combine(self, probs: Mapping[str, np.ndarray]) -> np.ndarray:
        stacked = np.stack([probs[name] for name in self.members])  # (members, n, patterns)
        return np.einsum("mnp,mp->np", stacked, self.weights)

    def decide_from(self, probs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(combined probabilities, 0/1 decisions) from the members' probabilities."""
        mixed = self.combine(probs)
        decisions = mixed >= self.thresholds[None, :]
        if self.or_rules.any():
            decisions |= (probs["rules"] >= self.rules_threshold) & self.or_rules[None, :]
        return mixed, decisions.astype(np.int64)

    def predict_proba(self, contexts: Sequence[TurnInContext]) -> np.ndarray:
        mixed, decisions = self.decide_from(self.member_probs(contexts))
        # A pattern switched on by the rules OR reports at least its threshold, so probabilities and
        # decisions never disagree.
        return np.where(decisions.astype(bool), np.maximum(mixed, self.thresholds[None, :]), mixed)

    def close(self) -> None:
        for member in self.members.values():
            member.close()

    # -- tuning ---------------------------------------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        members: Mapping[str, Labeler],
        train_probs: Mapping[str, np.ndarray],
        y: np.ndarray,
        min_rules_precision: float = 0.85,
        rules_threshold: float = 0.5,
        *,
        mask: np.ndarray | None = None,
        groups: Sequence[str] | None = None,
        mix: Sequence[str] | None = None,
    ) -> EnsembleLabeler:
        """Choose weights, thresholds and OR switches per pattern, maximising training F1.

        `train_probs` must be honest for trained members (held out, best out-of-source), or the
        ensemble would learn to trust an overfitted member. mask: (n, 13) where labels are known
        (weak labels decide some patterns only); groups: each row's source, so the rules' OR needs
        their precision on every source where they fire at least 3 times; mix: the members whose
        probabilities may carry weight in the mean (default: all). A member whose training scores are
        not held out (the rules, written after reading the gold set) cannot be validated by them, so
        the stage mixes only the trained members and lets the rules in through the OR alone (their
        scores are also features of the embedding labeler). Ties prefer equal weights and no OR.
        """
        names = list(members)
        mixable = set(names if mix is None else mix) & set(names)
        y = np.asarray(y, dtype=np.int64)
        known = np.ones_like(y, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        sources = np.asarray(list(groups) if groups is not None else ["all"] * len(y))
        grid = [
            w
            for w in weight_grid(len(names))
            if all(wi == 0 or n in mixable for wi, n in zip(w, names, strict=True))
        ] or weight_grid(len(names))
        uniform = np.array([1.0 if n in mixable else 0.0 for n in names])
        uniform = uniform / uniform.sum() if uniform.sum() else np.full(len(names), 1 / len(names))
        weights = np.zeros((len(names), len(PATTERN_NAMES)))
        thresholds, or_rules = [], []
        for k in range(len(PATTERN_NAMES)):
            rows = np.flatnonzero(known[:, k])
            yk, src = y[rows, k], sources[rows]
            rules_dec = (train_probs["rules"][rows, k] >= rules_threshold) if "rules" in train_probs else None
            may_or = False
            if rules_dec is not None and rules_dec.sum() >= 3:
                checked = [g for g in np.unique(src) if rules_dec[src == g].sum() >= 3]
                may_or = all(yk[rules_dec & (src == g)].mean() >= min_rules_precision for g in checked)
            best: tuple[float, float, tuple[float, ...], float, bool] | None = None
            for w in grid:
                mixed = sum(wi * train_probs[n][rows, k] for wi, n in zip(w, names, strict=True))
                for use_or in [False, True] if may_or else [False]:
                    # with the OR, a turn the rules flag is positive whatever the threshold
                    t, f = best_threshold(yk, np.where(rules_dec, 1.0, mixed) if use_or else mixed)
                    key = (f, -float(np.abs(np.array(w) - uniform).sum()) - (0.01 if use_or else 0.0))
                    if best is None or key > (best[0], best[1]):
                        best = (key[0], key[1], w, t, use_or)
            assert best is not None
            weights[:, k] = best[2]
            thresholds.append(best[3])
            or_rules.append(best[4])
        return cls(members, weights, thresholds, or_rules, rules_threshold)

    # -- persistence ----------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "members": list(self.members),
            "patterns": list(PATTERN_NAMES),
            "weights": {
                n: dict(zip(PATTERN_NAMES, map(float, self.weights[i]), strict=True))
                for i, n in enumerate(self.members)
            },
            "thresholds": dict(zip(PATTERN_NAMES, map(float, self.thresholds), strict=True)),
            "or_rules": [n for n, flag in zip(PATTERN_NAMES, self.or_rules, strict=True) if flag],
            "rules_threshold": self.rules_threshold,
        }

    def save(self, path: str | Path) -> Path:
        write_json(path, self.state())
        return Path(path)

    @classmethod
    def load(cls, path: str | Path, members: Mapping[str, Labeler]) -> EnsembleLabeler:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no tuned ensemble (run the `label` stage first)")
        state = json.loads(path.read_text())
        if state.get("patterns") != list(PATTERN_NAMES):
            raise ValueError(f"{path}: tuned for other patterns; rerun the `label` stage")
        missing = [m for m in state["members"] if m not in members]
        if missing:
            raise ValueError(f"{path}: members {missing} were not provided")
        ordered = {m: members[m] for m in state["members"]}
        weights = np.array([[state["weights"][m][p] for p in PATTERN_NAMES] for m in ordered])
        thresholds = [state["thresholds"][p] for p in PATTERN_NAMES]
        or_rules = [p in state["or_rules"] for p in PATTERN_NAMES]
        return cls(ordered, weights, thresholds, or_rules, state.get("rules_threshold", 0.5))
