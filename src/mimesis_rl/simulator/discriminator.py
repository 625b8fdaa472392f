"""A real-vs-simulated discriminator for user turns in context.

It is both a training signal (the realism reward is its probability of "real") and a yardstick
(the fidelity evaluation's Turing distance is how well a fresh one separates real from simulated
turns). Features: `cheap` = style statistics + hashed character n-grams of the message and of
its overlap with the agent's message (fast, no model); `minilm` = the style statistics plus MiniLM
embeddings of the message and the context. The classifier is scikit-learn's logistic regression.

It is saved as plain arrays (`discriminator.npz`: the scaler's and the classifier's numbers and a
JSON header), never as a pickle: the file ships in registered bundles, and loading a pickle runs
whatever code it names. `load` reads it with `allow_pickle=False` and refuses the old
`discriminator.joblib` pickles with a clear error (re-run `sim_rl` to get the safe file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from mimesis_rl.fsutil import atomic_open
from mimesis_rl.simulator.roleplay import role_violations

FEATURE_KINDS = ("cheap", "minilm")
FILE_NAME = "discriminator.npz"
FORMAT_VERSION = 1
_ARRAYS = ("scaler_mean", "scaler_var", "scaler_scale", "coef", "intercept", "classes")
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
        """Plain arrays + a JSON header in one .npz (no pickle); written atomically."""
        if not self.fitted:
            raise RuntimeError("the discriminator is not fitted: nothing to save")
        path = Path(path)
        header = {"format": "mimesis-turn-discriminator", "version": FORMAT_VERSION,
                  "features": self.features, "c": self.c, "seed": self.seed, "n_hash": self.n_hash,
                  "n_samples_seen": int(np.sum(self.scaler.n_samples_seen_))}
        arrays = {"scaler_mean": self.scaler.mean_, "scaler_var": self.scaler.var_,
                  "scaler_scale": self.scaler.scale_, "coef": self.classifier.coef_,
                  "intercept": self.classifier.intercept_,
                  "classes": self.classifier.classes_.astype(np.int64)}
        with atomic_open(path, "wb") as handle:
            np.savez(handle, header=np.array(json.dumps(header)), **arrays)
        return path

    @staticmethod
    def load(path: str | Path) -> TurnDiscriminator:
        """Read a saved discriminator without unpickling anything (`allow_pickle=False`)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: discriminator not found (it is trained by the sim_rl stage)")
        if path.suffix in (".joblib", ".pkl", ".pickle"):
            raise ValueError(f"{path}: a pickled discriminator (from an older sim_rl) is not loaded: "
                             "unpickling runs code from the file. Re-run the sim_rl stage to write "
                             f"{FILE_NAME}.")
        try:
            with np.load(path, allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                arrays = {name: np.asarray(data[name]) for name in _ARRAYS}
        except (OSError, ValueError, KeyError) as exc:  # not an npz, a pickled array, a missing array
            raise ValueError(f"{path}: not a saved TurnDiscriminator ({exc})") from None
        if header.get("format") != "mimesis-turn-discriminator" or header.get("version") != FORMAT_VERSION:
            raise ValueError(f"{path}: discriminator format {header.get('format')!r} version "
                             f"{header.get('version')!r}; this code reads version {FORMAT_VERSION}")
        disc = TurnDiscriminator(features=header["features"], c=float(header["c"]), seed=int(header["seed"]),
                                 n_hash=int(header["n_hash"]))
        scaler = disc.scaler
        scaler.mean_, scaler.var_, scaler.scale_ = (arrays["scaler_mean"], arrays["scaler_var"],
                                                    arrays["scaler_scale"])
        scaler.n_features_in_ = scaler.mean_.shape[0]
        scaler.n_samples_seen_ = int(header["n_samples_seen"])
        clf = disc.classifier
        clf.coef_, clf.intercept_, clf.classes_ = arrays["coef"], arrays["intercept"], arrays["classes"]
        clf.n_features_in_ = clf.coef_.shape[1]
        disc.fitted = True
        return disc
