"""A real-vs-simulated discriminator for user turns in context.

It is both a training signal (the realism reward is its probability of "real") and a yardstick
(the fidelity evaluation's Turing distance is how well a fresh one separates real from simulated
turns). Features: `cheap` = style statistics + hashed character n-grams of the message and of
its overlap with the agent's message (fast, no model); `minilm` = the style statistics plus MiniLM
embeddings of the message and the context. The classifier is scikit-learn's logistic regression,
saved with joblib as a versioned artifact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import joblib
import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from mimesis_rl.fsutil import atomic_open
from mimesis_rl.simulator.roleplay import role_violations

FEATURE_KINDS = ("cheap", "minilm")
_WORD = re.compile(r"[a-z0-9']+")


def style_features(contexts: Sequence[str], messages: Sequence[str]) -> np.ndarray:
    """Length, punctuation, casing, list/markdown, assistant phrasing and overlap with the context."""
    rows = []
    for context, message in zip(contexts, messages, strict=True):
        words = message.split()
        n_chars = max(len(message), 1)
        msg_words = set(_WORD.findall(message.lower()))
        ctx_words = set(_WORD.findall((context or "").lower()))
        overlap = len(msg_words & ctx_words) / max(len(msg_words), 1)
        violations = role_violations(message)
        rows.append([
            np.log1p(len(message)), np.log1p(len(words)),
            message.count("?") / n_chars * 100, message.count("!") / n_chars * 100,
            message.count(",") / n_chars * 100, message.count(".") / n_chars * 100,
            sum(c.isupper() for c in message) / n_chars, sum(c.isdigit() for c in message) / n_chars,
            float(message[:1].isupper()), float(message.rstrip()[-1:] in ".!?"), float("\n" in message),
            np.mean([len(w) for w in words]) if words else 0.0,
            float(bool(violations)), len(violations), overlap, np.log1p(len(context or "")),
            float("?" in (context or "")),
        ])
    return np.asarray(rows, dtype=np.float32)


class TurnDiscriminator:
    """P(real | agent context, user message). `fit`, `predict_real`, `save`/`load`."""

    def __init__(self, features: str = "cheap", c: float = 1.0, seed: int = 0, n_hash: int = 2**12) -> None:
        if features not in FEATURE_KINDS:
            raise ValueError(f"discriminator features {features!r}: choose one of {FEATURE_KINDS}")
        self.features = features
        self.c = c
        self.seed = seed
        self.n_hash = n_hash
        self.scaler = StandardScaler()
        self.classifier = LogisticRegression(C=c, max_iter=2000, random_state=seed)
        self.fitted = False

    def _hasher(self) -> HashingVectorizer:
        return HashingVectorizer(analyzer="char_wb", ngram_range=(2, 4), n_features=self.n_hash,
                                 alternate_sign=False, norm="l2", lowercase=False)

    def _matrix(self, contexts: Sequence[str], messages: Sequence[str],
                fit: bool = False) -> sparse.csr_matrix:
        style = style_features(contexts, messages)
        style = self.scaler.fit_transform(style) if fit else self.scaler.transform(style)
        blocks = [sparse.csr_matrix(style)]
        if self.features == "cheap":
            blocks.append(self._hasher().transform(list(messages)))
        else:
            from mimesis_rl.simulator.embeddings import encode

            msg = encode(list(messages))
            ctx = encode([c or "" for c in contexts])
            blocks += [sparse.csr_matrix(msg), sparse.csr_matrix(msg * ctx)]
        return sparse.hstack(blocks).tocsr()

    def fit(self, contexts: Sequence[str], messages: Sequence[str],
            labels: Sequence[int]) -> TurnDiscriminator:
        """labels: 1 = real user turn, 0 = simulated."""
        y = np.asarray(labels, dtype=int)
        if len(set(y.tolist())) < 2:
            raise ValueError("the discriminator needs both real (1) and simulated (0) examples")
        self.classifier.fit(self._matrix(contexts, messages, fit=True), y)
        self.fitted = True
        return self

    def predict_real(self, contexts: Sequence[str], messages: Sequence[str]) -> np.ndarray:
        if not self.fitted:
            raise RuntimeError("the discriminator is not fitted")
        if not messages:
            return np.zeros(0)
        return self.classifier.predict_proba(self._matrix(contexts, messages))[:, 1]

    def auc(self, contexts: Sequence[str], messages: Sequence[str], labels: Sequence[int]) -> float:
        return float(roc_auc_score(np.asarray(labels), self.predict_real(contexts, messages)))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        with atomic_open(path, "wb") as handle:
            joblib.dump(self, handle)
        return path

    @staticmethod
    def load(path: str | Path) -> TurnDiscriminator:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: discriminator not found (it is trained by the sim_rl stage)")
        model = joblib.load(path)
        if not isinstance(model, TurnDiscriminator):
            raise TypeError(f"{path}: not a TurnDiscriminator (got {type(model).__name__})")
        return model
