"""Build, fit and load labelers by name, so the stage, the CLI and the benchmarks make them the same way.

Offline labelers train on the gold `train` split only (plus, with `label.weak_labels`, CaSiNo
messages whose own strategy annotations decide `negotiation` or `pushback`, from dialogues the
annotation check never uses). `fit_offline` fits the embedding labeler (with held-out, out-of-source
probabilities) and tunes the ensemble on them; `build_labeler` loads the saved artifacts when they
exist and otherwise fits them on the fly (a few seconds plus the encoding).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.gold import GOLD_FILE, GoldItem, label_matrix, load_gold
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.config import BACKENDS, LabelSettings
from mimesis_rl.behavior.labelers.embedding import EmbeddingLabeler, context_features
from mimesis_rl.behavior.labelers.ensemble import EnsembleLabeler
from mimesis_rl.behavior.labelers.rules import RulesLabeler
from mimesis_rl.data.schema import PATTERN_NAMES

log = logging.getLogger(__name__)


@dataclass
class FittedLabelers:
    rules: RulesLabeler
    embedding: EmbeddingLabeler
    ensemble: EnsembleLabeler
    train_probs: dict[str, np.ndarray]
    data: TrainingData | None = None


@dataclass
class TrainingData:
    """Labelled contexts to fit on: y (n, 13), mask (n, 13; 1 = label known), the source of each row."""

    contexts: list[TurnInContext]
    y: np.ndarray
    mask: np.ndarray
    groups: list[str]
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.contexts)
        shape = (n, len(PATTERN_NAMES))
        if self.y.shape != shape or self.mask.shape != shape or len(self.groups) != n:
            raise ValueError("training data: contexts, y, mask and groups must have matching lengths")


def training_data(
    config: LabelSettings, items: Sequence[GoldItem] | None = None, *, weak: bool | None = None
) -> TrainingData:
    """Gold items (default: the train split) plus, when `weak` (default `label.weak_labels`) and CaSiNo is
    on this machine, weak labels from CaSiNo's annotations (source `casino`, decided patterns only)."""
    from mimesis_rl.behavior.gold.resolve import SourceUnavailable, casino_files

    items = list(load_gold(config.gold or GOLD_FILE, split="train") if items is None else items)
    contexts = [item.context for item in items]
    y = label_matrix([item.patterns for item in items])
    mask = np.ones_like(y)
    groups = [item.source for item in items]
    counts = {f"gold_{g}": groups.count(g) for g in sorted(set(groups))}
    if config.weak_labels if weak is None else weak:
        try:
            casino_files()
        except SourceUnavailable as exc:
            log.warning("no weak labels: %s", exc)
        else:
            from mimesis_rl.behavior.strategies import weak_labels

            weak_contexts, weak_y, weak_mask = weak_labels()
            contexts += weak_contexts
            y = np.vstack([y, weak_y])
            mask = np.vstack([mask, weak_mask])
            groups += ["casino"] * len(weak_contexts)
            counts["weak_casino"] = len(weak_contexts)
    return TrainingData(contexts, y, mask, groups, counts)


def build_llm(config: LabelSettings) -> Labeler:
    from mimesis_rl.behavior.labelers.llm import LLMLabeler
    from mimesis_rl.behavior.openai_client import ChatClient, ChatClientSettings

    section = config.llm
    client = ChatClient(ChatClientSettings.from_section(section, where="label.llm"))
    return LLMLabeler(
        client,
        concurrency=int(section.get("concurrency", 4)),
        temperature=float(section.get("temperature", 0.0)),
        max_tokens=int(section.get("max_tokens", 200)),
        thresholds=float(section.get("threshold", 0.5)),
        instructions=str(section.get("instructions", "guide")),
        history_turns=int(section.get("history_turns", 6)),
    )


def fit_offline(
    config: LabelSettings,
    encoder: Any | None = None,
    llm: Labeler | None = None,
    data: TrainingData | None = None,
) -> FittedLabelers:
    """Fit the embedding labeler and tune the ensemble on `data` (default: `training_data(config)`)."""
    data = data or training_data(config)
    contexts, y = data.contexts, data.y
    rules = RulesLabeler(config.rules_thresholds)
    rules_probs = rules.predict_proba(contexts)
    encoder = encoder or config.embedding.encoder()
    features = context_features(encoder, contexts, rules_probs)
    embedding, oof = EmbeddingLabeler.fit(
        contexts, y, config.embedding, encoder=encoder, mask=data.mask, groups=data.groups, features=features
    )
    probs: dict[str, np.ndarray] = {"rules": rules_probs, "embedding": oof}
    members: dict[str, Labeler] = {"rules": rules, "embedding": embedding}
    wanted = list(config.ensemble.get("members", ["rules", "embedding"]))
    if "llm" in wanted:
        llm = llm or build_llm(config)
        members["llm"] = llm
        probs["llm"] = llm.predict_proba(contexts)
    chosen = {name: members[name] for name in wanted}
    ensemble = EnsembleLabeler.fit(
        chosen,
        {n: probs[n] for n in wanted},
        y,
        min_rules_precision=float(config.ensemble.get("min_rules_precision", 0.85)),
        rules_threshold=0.5,
        mask=data.mask,
        groups=data.groups,
        mix=list(config.ensemble.get("mix") or [n for n in wanted if n != "rules"]),
    )
    return FittedLabelers(rules, embedding, ensemble, probs, data)


def save_fitted(fitted: FittedLabelers, config: LabelSettings) -> None:
    fitted.embedding.save(config.embedding_artifact)
    fitted.ensemble.save(config.ensemble_artifact)


def _stale(config: LabelSettings, fit_if_missing: bool) -> bool:
    """True when the saved embedding labeler was fitted for other features (an older release) and may be
    refitted; without `fit_if_missing` loading it raises the usual clear error instead."""
    from mimesis_rl.behavior.labelers.embedding import FEATURE_VERSION

    if not fit_if_missing:
        return False
    try:
        import skops.io as sio

        untrusted = sio.get_untrusted_types(file=config.embedding_artifact)
        if any(not t.startswith("sklearn.") for t in untrusted):
            return False  # let `load` refuse it with its message
        state = sio.load(config.embedding_artifact, trusted=untrusted)
    except Exception:  # noqa: BLE001 - an unreadable artifact is reported by `load`
        return False
    if state.get("feature_version") != FEATURE_VERSION:
        log.warning(
            "%s was fitted for feature version %s (now %s): refitting on the gold set (rerun the `label` "
            "stage to save the new one)",
            config.embedding_artifact,
            state.get("feature_version"),
            FEATURE_VERSION,
        )
        return True
    return False


def build_labeler(
    name: str, config: LabelSettings, *, fit_if_missing: bool = True, encoder: Any | None = None
) -> Labeler:
    """The labeler called `name`, from saved artifacts when present, else fitted on the gold train split."""
    if name not in BACKENDS:
        raise ValueError(f"unknown labeler {name!r}; known: {', '.join(BACKENDS)}")
    if name == "rules":
        return RulesLabeler(config.rules_thresholds)
    if name == "llm":
        return build_llm(config)
    have_embedding = config.embedding_artifact.exists() and not _stale(config, fit_if_missing)
    if name == "embedding" and have_embedding:
        return EmbeddingLabeler.load(
            config.embedding_artifact,
            encoder=encoder,
            batch_size=config.embedding.batch_size,
            threads=config.embedding.threads,
        )
    if name == "ensemble" and have_embedding and config.ensemble_artifact.exists():
        members: dict[str, Labeler] = {
            "rules": RulesLabeler(config.rules_thresholds),
            "embedding": EmbeddingLabeler.load(
                config.embedding_artifact,
                encoder=encoder,
                batch_size=config.embedding.batch_size,
                threads=config.embedding.threads,
            ),
        }
        if "llm" in config.ensemble.get("members", []):
            members["llm"] = build_llm(config)
        return EnsembleLabeler.load(config.ensemble_artifact, members)
    if not fit_if_missing:
        raise FileNotFoundError(f"no fitted {name} labeler under {config.model_dir} (run the `label` stage)")
    log.warning(
        "no fitted %s labeler under %s: fitting one on the gold train split now", name, config.model_dir
    )
    fitted = fit_offline(config, encoder=encoder)
    return fitted.embedding if name == "embedding" else fitted.ensemble


def build_labelers(
    names: Sequence[str], config: LabelSettings, *, fit_if_missing: bool = True, encoder: Any | None = None
) -> dict[str, Labeler]:
    """Several labelers by name; when the trained ones must be fitted (no or stale artifacts), they are
    fitted once and shared instead of once each."""
    trained = [n for n in names if n in ("embedding", "ensemble")]
    missing = not config.embedding_artifact.exists() or (
        "ensemble" in trained and not config.ensemble_artifact.exists()
    )
    fitted = None
    if trained and fit_if_missing and (missing or _stale(config, True)):
        log.warning(
            "fitting the trained labelers %s on the gold set (no saved ones under %s)",
            trained,
            config.model_dir,
        )
        fitted = fit_offline(config, encoder=encoder)
    out: dict[str, Labeler] = {}
    try:
        for name in names:
            if fitted is not None and name in trained:
                out[name] = getattr(fitted, name)
            else:
                out[name] = build_labeler(name, config, fit_if_missing=fit_if_missing, encoder=encoder)
    except BaseException:
        for labeler in out.values():
            labeler.close()
        raise
    return out
