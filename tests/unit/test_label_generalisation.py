"""Generalisation machinery of the labelers: domain-free acts, CaSiNo's annotations as labels and as a
check, partial labels with out-of-source held-out scores, and the cross-source report."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.crosssource import cross_source, markdown, summary
from mimesis_rl.behavior.gold import load_gold
from mimesis_rl.behavior.labelers import LabelSettings
from mimesis_rl.behavior.labelers.acts import USER_ACTS, acts
from mimesis_rl.behavior.labelers.embedding import EmbeddingLabeler, EmbeddingSettings
from mimesis_rl.behavior.labelers.rules import RulesLabeler
from mimesis_rl.behavior.report import evaluate_labelers
from mimesis_rl.behavior.strategies import annotated_turns, check_annotations, weak_labels
from mimesis_rl.data.schema import PATTERN_NAMES, Turn


def ctx(user: str, agent: str | None = None) -> TurnInContext:
    history = (Turn(role="assistant", content=agent),) if agent else ()
    return TurnInContext(text=user, history=history)


def found(text: str) -> set[str]:
    return {name for name, flag in zip(USER_ACTS, acts(text), strict=True) if flag}


def test_acts_read_structure_not_domain_words() -> None:
    assert {"allocation", "quantity"} <= found("I'll take 3 firewood and you can keep the rest")
    assert "conditional" in found("I will give you 2 food if I can have all the water")
    assert "conditional" in found("If you waive the fee I'll sign today")
    assert "ask_share" in found("Can I take 2 foods though?")
    assert "decline" in found("1 water will not be enough for my body.")
    assert "complaint" in found("You didn't even answer my question.")
    assert found("hello there, how are you?") == set()
    assert acts(None) == [0.0] * len(USER_ACTS)


def test_rules_catch_the_misses_the_issue_describes() -> None:
    rules = RulesLabeler()
    offer = "I can give you two firewood and one water, and I keep the food."
    cases = {
        "negotiation": ctx("I'll take 2 water and you can keep all the firewood.", offer),
        "refusal": ctx("Sorry, that won't work for me, I really need the food.", offer),
    }
    for pattern, context in cases.items():
        assert pattern in rules.label_contexts([context])[0][0], pattern
    # accepting the offer is neither
    accepted = rules.label_contexts([ctx("Sounds good, deal!", offer)])[0][0]
    assert "refusal" not in accepted and "negotiation" not in accepted


@pytest.fixture
def casino_folder(tmp_path: Path, fixtures_dir: Path) -> Path:
    """The two-dialogue CaSiNo-format fixture (one annotated) as both a weak-label and a check file."""
    for name in ("casino_train.json", "casino_valid.json"):
        shutil.copy(fixtures_dir / "corpora" / "casino_small.json", tmp_path / name)
    return tmp_path


def test_annotations_decide_mapped_patterns_only(casino_folder: Path) -> None:
    turns = annotated_turns(["casino_valid.json"], casino_folder)
    assert turns and all(t.strategies for t in turns)
    by_text = {t.context.text: t for t in turns}
    offer = by_text["How about I take all firewood and 2 water?"]
    assert offer.decided("negotiation") == 1 and offer.context.last_agent  # promote-coordination
    chat = by_text["Hi! Excited for the camping trip?"]
    assert chat.decided("negotiation") == 0 and chat.decided("pushback") == 0  # small-talk only
    need = by_text["I could use extra water, it is hot where I go."]
    assert need.decided("negotiation") is None  # self-need: undecided

    contexts, y, mask = weak_labels(casino_folder)
    assert len(contexts) == len(y) == len(mask) and mask.sum() > 0
    unmapped = [k for k, name in enumerate(PATTERN_NAMES) if name not in ("negotiation", "pushback")]
    assert mask[:, unmapped].sum() == 0 and (y <= mask).all()

    check = check_annotations(RulesLabeler(), casino_folder, files=("casino_valid.json",))
    assert check["dialogues"] == 1 and set(check["patterns"]) == {"negotiation", "pushback"}
    assert check["patterns"]["negotiation"]["positives"] >= 1
    assert 0.0 <= check["mean_f1"] <= 1.0
    assert check["mean_f1_ci"] is None  # one dialogue: nothing to resample
    with pytest.raises(FileNotFoundError, match="casino_test.json"):
        check_annotations(RulesLabeler(), casino_folder, files=("casino_test.json",))


class HashEncoder:
    """A deterministic stand-in for MiniLM (the encoder is not under test here): hashed word counts."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 384] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-6)


def test_partial_labels_and_out_of_source_held_out_scores() -> None:
    rng = np.random.default_rng(0)
    texts = ["no thanks", "how about 2 for me", "what do you mean?", "ok", "ugh!!", "hmm maybe"]
    contexts = [ctx(f"{texts[i % len(texts)]} {i}", "Would you like the offer?") for i in range(120)]
    y = (rng.random((120, len(PATTERN_NAMES))) < 0.35).astype(int)
    mask = np.ones_like(y)
    mask[80:, :5] = 0  # weak rows: only some patterns decided
    groups = ["a"] * 40 + ["b"] * 40 + ["c"] * 40
    config = EmbeddingSettings(C_grid=(0.1, 1.0), cv_folds=3)
    labeler, held_out = EmbeddingLabeler.fit(contexts, y, config, HashEncoder(), mask=mask, groups=groups)
    assert np.isnan(held_out[80:, :5]).all() and np.isfinite(held_out[mask == 1]).all()
    assert ((labeler.thresholds > 0) & (labeler.thresholds < 1)).all()
    probs = labeler.predict_proba(contexts[:7])
    assert probs.shape == (7, len(PATTERN_NAMES)) and ((probs >= 0) & (probs <= 1)).all()
    with pytest.raises(ValueError, match="mask must have the shape"):
        EmbeddingLabeler.fit(contexts, y, config, HashEncoder(), mask=mask[:10])


def test_a_source_holding_most_positives_is_held_out_by_folds() -> None:
    from sklearn.metrics import roc_auc_score

    from mimesis_rl.behavior.labelers.embedding import _held_out_scores

    rng = np.random.default_rng(1)
    groups = np.array(["a"] * 200 + ["b"] * 100 + ["c"] * 100)
    y = np.zeros(400, dtype=int)
    y[:40] = 1  # source a: 40 of the 60 positives, told apart by feature 0
    y[200:210] = y[300:310] = 1  # sources b and c: 10 each, told apart by feature 1
    x = rng.normal(size=(400, 4))
    x[:40, 0] += 3.0
    x[200:210, 1] += 3.0
    x[300:310, 1] += 3.0
    a = groups == "a"
    # fitted without a, the model never saw what marks a's positives: useless scores to calibrate on
    leave_out = _held_out_scores(x, y, groups, 1.0, 5, seed=0, max_share=1.01)
    assert roc_auc_score(y[a], leave_out[a]) < 0.75
    # with a holding two thirds of the positives, its rows are scored by folds that include it
    hybrid = _held_out_scores(x, y, groups, 1.0, 5, seed=0, max_share=0.5)
    assert roc_auc_score(y[a], hybrid[a]) > 0.9
    # b and c (a sixth each) stay out-of-source: the same scores either way
    assert np.allclose(hybrid[~a], leave_out[~a])


def test_cross_source_rules_report() -> None:
    config = LabelSettings()
    items = load_gold()
    results = cross_source(config, ["rules"], items=items)
    sources = {item.source for item in items} - {"written"}
    assert set(results["rules"]) == sources and "chitchat" in sources
    chitchat = results["rules"]["chitchat"]
    assert chitchat.report.n_items == sum(1 for item in items if item.source == "chitchat")
    assert len(chitchat.scored) >= 5 and 0.0 < chitchat.macro_f1 <= 1.0
    assert "gold_chitchat" not in chitchat.trained_on and chitchat.trained_on["gold_written"] > 0
    table = markdown(results)
    assert "rules (chitchat held out)" in table and "**macro-F1**" in table
    assert summary(results)["rules"]["min"] <= summary(results)["rules"]["mean"]


def test_report_card_json_and_metrics() -> None:
    result = evaluate_labelers(LabelSettings(), {"rules": RulesLabeler()})
    payload = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert payload["cross_source_summary"]["rules"]["chitchat"] > 0
    assert payload["reports"][0]["labeler"] == "rules"
    metrics = result.metrics()
    assert 0 < metrics["eval"]["rules"]["macro_f1"] <= 1
    assert metrics["cross_source"]["rules"]["chitchat"]["macro_f1"] == pytest.approx(
        payload["cross_source_summary"]["rules"]["chitchat"]
    )
    low, high = payload["reports"][0]["macro_f1_ci"]  # in-distribution, over the test split's dialogues
    assert low <= payload["reports"][0]["macro_f1"] <= high and high - low > 0
    low, high = payload["cross_source_summary"]["rules"]["chitchat_ci"]
    assert low <= payload["cross_source_summary"]["rules"]["chitchat"] <= high
    assert metrics["cross_source"]["rules"]["chitchat"]["macro_f1_low"] == pytest.approx(low)
    if "casino" not in payload["gold_unavailable"]:
        assert 0 <= metrics["casino_annotations"]["rules"]["mean_f1"] <= 1
        check = payload["casino_annotations"]["rules"]
        assert check["mean_f1_ci"][0] <= check["mean_f1"] <= check["mean_f1_ci"][1]
    else:
        assert any("casino" in note for note in payload["notes"])
    assert result.markdown().startswith("### Cross-source")


def test_build_labelers_fits_trained_ones_at_most_once(tmp_path: Path) -> None:
    from mimesis_rl.behavior.labelers import build_labelers

    config = LabelSettings(model_dir=str(tmp_path))
    assert isinstance(build_labelers(["rules"], config)["rules"], RulesLabeler)
    with pytest.raises(FileNotFoundError, match="no fitted embedding labeler"):
        build_labelers(["rules", "embedding"], config, fit_if_missing=False)


def test_macro_f1_of_skips_patterns_a_resample_cannot_score() -> None:
    from mimesis_rl.behavior.evaluation import macro_f1_of

    y_true = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0]])
    y_pred = np.array([[1, 0, 0], [0, 0, 0], [0, 0, 0]])
    # column 0: tp 1, fn 1 -> 2/3; column 1: fn 1 -> 0; column 2: nothing true or predicted -> left out
    assert macro_f1_of(y_true, y_pred, [0, 1, 2]) == pytest.approx((2 / 3 + 0) / 2)
    assert macro_f1_of(y_true, y_pred, [2]) != macro_f1_of(y_true, y_pred, [2])  # NaN: nothing to score


def _source_report(name: str, y_true: np.ndarray, y_pred: np.ndarray, dialogues: list[str]):
    from mimesis_rl.behavior.crosssource import MIN_SUPPORT, SourceReport
    from mimesis_rl.behavior.evaluation import evaluate_predictions, scored_patterns_of

    report = evaluate_predictions(name, y_true, y_pred)
    scored = scored_patterns_of(y_true, MIN_SUPPORT)
    return SourceReport(name, "chitchat", report, scored, {}, y_true, y_pred, dialogues)


def test_intervals_resample_dialogues_and_pair_labelers() -> None:
    from mimesis_rl.behavior.crosssource import differences, markdown, paired_interval

    rng = np.random.default_rng(0)
    y_true = (rng.random((120, len(PATTERN_NAMES))) < 0.2).astype(int)
    noisy = np.where(rng.random(y_true.shape) < 0.3, 1 - y_true, y_true)
    dialogues = [f"d{i // 2}" for i in range(120)]  # two turns per dialogue, drawn together
    perfect = _source_report("perfect", y_true, y_true.copy(), dialogues)
    guess = _source_report("guess", y_true, noisy, dialogues)
    low, high = guess.interval
    assert low <= guess.macro_f1 <= high and 0 < high - low < 0.3
    assert perfect.interval == [1.0, 1.0]
    # paired: the same resamples for both, so a labeler against itself differs by exactly 0
    assert paired_interval(guess, guess) == [0.0, 0.0]
    results = {"guess": {"chitchat": guess}, "perfect": {"chitchat": perfect}}
    diff = differences(results)["perfect"]["chitchat"]
    assert diff["minus"] == "guess" and diff["ci"][0] > 0 and diff["difference"] > 0
    table = markdown(results)
    assert "minus guess (paired)" in table and f"[{low:.2f}, {high:.2f}]" in table
    one_dialogue = _source_report("guess", y_true, noisy, ["d0"] * 120)
    assert one_dialogue.interval is None  # nothing to resample
    with pytest.raises(ValueError, match="same held-out turns"):
        paired_interval(guess, one_dialogue)


def test_gold_items_know_their_dialogue() -> None:
    items = load_gold()
    written = [item for item in items if item.source == "written"]
    assert written and all(item.dialogue == item.id for item in written)
    corpus = [item for item in items if item.source != "written"]
    # both views of a two-party chat (ids ending -a / -b) are one dialogue: resampled together
    assert corpus and all(item.dialogue and not item.dialogue.endswith(("-a", "-b")) for item in corpus)


def test_cross_source_plot(tmp_path: Path) -> None:
    from mimesis_rl.behavior.plots import plot_cross_source

    items = [item for item in load_gold() if item.source in ("chitchat", "written")]
    results = cross_source(LabelSettings(), ["rules"], items=items)
    path = plot_cross_source(results, tmp_path / "cross.png")
    assert path.read_bytes().startswith(b"\x89PNG") and results["rules"]["chitchat"].interval is not None


def test_second_annotator_scored_against_gold_and_beside_labelers(tmp_path: Path) -> None:
    from mimesis_rl.behavior.agreement import second_opinions
    from mimesis_rl.behavior.gold import GoldError
    from mimesis_rl.behavior.report import beside_second_annotator

    items = [item for item in load_gold() if item.source == "chitchat"]
    sample = items[:60]
    path = tmp_path / "second.jsonl"
    # agrees with the gold on every item but drops `incomplete_utterance` everywhere
    rows = [{"id": i.id, "patterns": [p for p in i.patterns if p != "incomplete_utterance"]} for i in sample]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    opinion = second_opinions(items, path)["chitchat"]
    assert opinion.ids == [i.id for i in sample]
    per = opinion.per_pattern()
    assert "incomplete_utterance" in opinion.scored and per["incomplete_utterance"]["second_positives"] == 0
    assert per["incomplete_utterance"]["f1"] == 0.0
    assert all(v["f1"] == 1.0 and v["kappa"] == 1.0 for p, v in per.items() if p != "incomplete_utterance")
    assert opinion.macro_f1() == pytest.approx((len(opinion.scored) - 1) / len(opinion.scored))
    low, high = opinion.interval()
    assert low <= opinion.macro_f1() <= high

    result = evaluate_labelers(LabelSettings(), {"rules": RulesLabeler()}, annotations=False)
    result.second_annotator = beside_second_annotator({"chitchat": opinion}, result.cross_source)
    beside = result.second_annotator["chitchat"]
    rules_pred = result.cross_source["rules"]["chitchat"].predictions_for(opinion.ids)
    assert rules_pred.shape == opinion.y_gold.shape
    assert beside["labelers_cross_source"]["rules"]["macro_f1"] == pytest.approx(opinion.macro_f1(rules_pred))
    assert "second annotator vs gold" in result.markdown()
    payload = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert payload["second_annotator"]["chitchat"]["items"] == 60
    assert result.metrics()["second_annotator"]["chitchat"]["macro_f1"] == pytest.approx(opinion.macro_f1())

    path.write_text(json.dumps({"id": "cc-9999", "patterns": []}) + "\n")
    with pytest.raises(GoldError, match="cc-9999"):
        second_opinions(items, path)
