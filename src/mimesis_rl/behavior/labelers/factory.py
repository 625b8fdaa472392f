"""Build, fit and load labelers by name, so the stage, the CLI and the benchmarks make them the same way.

Offline labelers train on the gold `train` split only. `fit_offline` fits the embedding labeler
(with out-of-fold probabilities) and tunes the ensemble on them; `build_labeler` loads the saved
artifacts when they exist and otherwise fits them on the fly (a few seconds plus the encoding).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from mimesis_rl.behavior.gold import GOLD_FILE, label_matrix, load_gold
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.behavior.labelers.config import BACKENDS, LabelConfig
from mimesis_rl.behavior.labelers.embedding import EmbeddingLabeler
from mimesis_rl.behavior.labelers.ensemble import EnsembleLabeler
from mimesis_rl.behavior.labelers.rules import RulesLabeler

log = logging.getLogger(__name__)


@dataclass
class FittedLabelers:
    rules: RulesLabeler
    embedding: EmbeddingLabeler
    ensemble: EnsembleLabeler
    train_probs: dict[str, np.ndarray]


def build_llm(config: LabelConfig) -> Labeler:
    from mimesis_rl.behavior.labelers.llm import LLMLabeler
    from mimesis_rl.behavior.openai_client import ChatClient, ChatClientConfig

    section = config.llm
    client = ChatClient(ChatClientConfig.from_section(section, where="label.llm"))
    return LLMLabeler(
        client,
        concurrency=int(section.get("concurrency", 4)),
        temperature=float(section.get("temperature", 0.0)),
        max_tokens=int(section.get("max_tokens", 200)),
        thresholds=float(section.get("threshold", 0.5)),
    )


def fit_offline(
    config: LabelConfig, encoder: Any | None = None, llm: Labeler | None = None
) -> FittedLabelers:
    """Fit the embedding labeler and tune the ensemble on the gold train split."""
    train = load_gold(config.gold or GOLD_FILE, split="train")
    contexts = [item.context for item in train]
    y = label_matrix([item.patterns for item in train])
    rules = RulesLabeler(config.rules_thresholds)
    embedding, oof = EmbeddingLabeler.fit(contexts, y, config.embedding, encoder=encoder)
    probs: dict[str, np.ndarray] = {"rules": rules.predict_proba(contexts), "embedding": oof}
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
    )
    return FittedLabelers(rules, embedding, ensemble, probs)


def save_fitted(fitted: FittedLabelers, config: LabelConfig) -> None:
    fitted.embedding.save(config.embedding_artifact)
    fitted.ensemble.save(config.ensemble_artifact)


def build_labeler(
    name: str, config: LabelConfig, *, fit_if_missing: bool = True, encoder: Any | None = None
) -> Labeler:
    """The labeler called `name`, from saved artifacts when present, else fitted on the gold train split."""
    if name not in BACKENDS:
        raise ValueError(f"unknown labeler {name!r}; known: {', '.join(BACKENDS)}")
    if name == "rules":
        return RulesLabeler(config.rules_thresholds)
    if name == "llm":
        return build_llm(config)
    have_embedding = config.embedding_artifact.exists()
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
