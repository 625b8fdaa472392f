"""The embedding and ensemble labelers with the real MiniLM (offline wheel): fit, persist, reload, score."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from mimesis_rl.behavior.evaluation import evaluate
from mimesis_rl.behavior.gold import load_gold
from mimesis_rl.behavior.labelers import (
    FittedLabelers,
    LabelSettings,
    build_labeler,
    fit_offline,
    save_fitted,
)
from mimesis_rl.behavior.labelers.embedding import EmbeddingLabeler, EmbeddingSettings
from mimesis_rl.behavior.labelers.encoder import SentenceEncoder, default_model_path
from mimesis_rl.data.schema import PATTERN_NAMES, Conversation, Turn

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("labeler")


@pytest.fixture(scope="module")
def config(model_dir: Path) -> LabelSettings:
    return LabelSettings(model_dir=str(model_dir))


@pytest.fixture(scope="module")
def fitted(config: LabelSettings) -> FittedLabelers:
    fitted = fit_offline(config)
    save_fitted(fitted, config)
    return fitted


@pytest.fixture(scope="module")
def gold_test_items() -> list:
    return load_gold(split="test")


def test_fit_gives_calibrated_held_out_probabilities(fitted: FittedLabelers) -> None:
    oof = fitted.train_probs["embedding"]
    data = fitted.data
    assert data is not None and oof.shape == data.y.shape
    known = data.mask.astype(bool)
    assert np.isfinite(oof[known]).all() and np.isnan(oof[~known]).all()  # weak rows decide 2 patterns
    assert ((oof[known] >= 0) & (oof[known] <= 1)).all()
    assert ((fitted.embedding.thresholds > 0) & (fitted.embedding.thresholds < 1)).all()
    n_gold = len(load_gold(split="train"))
    assert data.counts.get("weak_casino", 0) == len(data.y) - n_gold
    # held-out (out-of-source where possible) probabilities rank positives above negatives
    y = data.y.astype(bool)
    for k, name in enumerate(PATTERN_NAMES):
        rows = known[:, k]
        assert oof[rows & y[:, k], k].mean() > oof[rows & ~y[:, k], k].mean(), name


def test_best_offline_labeler_reaches_the_bar(fitted: FittedLabelers, gold_test_items: list) -> None:
    reports = {
        name: evaluate(getattr(fitted, name), gold_test_items, name)
        for name in ("rules", "embedding", "ensemble")
    }
    # measured 0.52 / 0.56 / 0.56 (rules / embedding / ensemble) on the 544-turn test split with CaSiNo
    # present (0.45 for embedding before the source carrying a pattern was held out by folds); the bars
    # guard against regressions, not the targets (see README)
    assert reports["embedding"].macro_f1 >= 0.45
    assert max(r.macro_f1 for r in reports.values()) >= 0.5
    assert reports["ensemble"].macro_f1 >= reports["rules"].macro_f1 - 0.05


def test_artifacts_reload_to_the_same_predictions(
    fitted: FittedLabelers, config: LabelSettings, gold_test_items: list
) -> None:
    contexts = [item.context for item in gold_test_items[:40]]
    loaded = EmbeddingLabeler.load(config.embedding_artifact, encoder=fitted.embedding.encoder)
    np.testing.assert_allclose(
        loaded.predict_proba(contexts), fitted.embedding.predict_proba(contexts), atol=1e-6
    )
    ensemble = build_labeler("ensemble", config, fit_if_missing=False, encoder=fitted.embedding.encoder)
    np.testing.assert_allclose(
        ensemble.predict_proba(contexts), fitted.ensemble.predict_proba(contexts), atol=1e-6
    )
    for change in ({"quantize": False}, {"precision": "float32"}):
        with pytest.raises(ValueError, match="cannot override"):
            EmbeddingLabeler.load(config.embedding_artifact, **change)


def test_missing_artifact_is_a_clear_error(tmp_path: Path, config: LabelSettings) -> None:
    empty = dataclasses.replace(config, model_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no fitted embedding labeler"):
        build_labeler("embedding", empty, fit_if_missing=False)


def test_encoder_deduplicates_and_normalises(fitted: FittedLabelers) -> None:
    vectors = fitted.embedding.encoder.encode(["No thanks.", "Sure!", "No thanks."])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(vectors[0], vectors[2])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


# Texts of very different lengths (one past max_seq_length), with a repeat: batching sorts by length.
TEXTS = [
    "No thanks.",
    "Could you tell me more about the return policy for items bought online during the sale?",
    "ok",
    " ".join(["I really need a laptop that is light, fast and cheap, for travel and for work"] * 6),
    "Sure!",
    "No thanks.",
    "What do you mean by that?",
]


@pytest.fixture(scope="module")
def float32_encoder() -> SentenceEncoder:
    return SentenceEncoder(precision="float32", batch_size=3)


def test_float32_encoder_matches_sentence_transformers(float32_encoder: SentenceEncoder) -> None:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(default_model_path()), device="cpu")
    reference.max_seq_length = 64
    expected = reference.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(float32_encoder.encode(TEXTS), expected, atol=2e-5)


def test_bfloat16_and_cache_keep_the_embeddings(float32_encoder: SentenceEncoder) -> None:
    bf16 = SentenceEncoder(precision="bfloat16", batch_size=3, cache_size=2)
    reference = float32_encoder.encode(TEXTS)
    first = bf16.encode(TEXTS)
    assert first.dtype == np.float32
    assert ((first * reference).sum(1) > 0.999).all()  # cosine to float32
    assert len(bf16._cache) == 2  # bounded: the two most recent texts
    np.testing.assert_array_equal(bf16.encode([TEXTS[-1]])[0], first[-1])  # served from the cache
    # re-encoded in other batches: the same up to bf16 rounding
    assert ((bf16.encode(TEXTS[::-1]) * first[::-1]).sum(1) > 0.9995).all()


def test_precision_settings() -> None:
    assert EmbeddingSettings().precision == "bfloat16"
    assert EmbeddingSettings.from_section({"quantize": True}).precision == "int8"
    assert EmbeddingSettings.from_section({"quantize": False}).precision == "float32"
    with pytest.raises(ValueError, match="not both"):
        EmbeddingSettings.from_section({"quantize": True, "precision": "int8"})
    with pytest.raises(ValueError, match="unknown 'fp8'"):
        EmbeddingSettings(precision="fp8")


def test_ensemble_labels_a_conversation(fitted: FittedLabelers) -> None:
    conv = Conversation(
        conversation_id="c",
        source="s",
        domain="shop",
        turns=[
            Turn(role="assistant", content="Can I interest you in our extended warranty for $199?"),
            Turn(role="user", content="No thanks, I'll pass."),
            Turn(role="assistant", content="The Dell XPS is $999."),
            Turn(role="user", content="If you can do it for $900 I'll order it right now."),
        ],
    )
    [labels] = fitted.ensemble.label([conv])
    assert "refusal" in labels[0].patterns
    assert "negotiation" in labels[1].patterns


@pytest.mark.slow
def test_cross_source_refits_without_the_held_out_source(fitted: FittedLabelers,
                                                          config: LabelSettings) -> None:
    from mimesis_rl.behavior.crosssource import cross_source

    results = cross_source(config, ["embedding", "ensemble"], encoder=fitted.embedding.encoder)
    for name in ("embedding", "ensemble"):
        for held, report in results[name].items():
            assert f"gold_{held}" not in report.trained_on
            if held == "casino":
                assert "weak_casino" not in report.trained_on  # CaSiNo's weak labels are CaSiNo too
            assert 0.0 <= report.macro_f1 <= 1.0 and report.scored
