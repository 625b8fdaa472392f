"""The `label` stage end to end on small splits: outputs, metrics, MLflow artifacts, and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest

from mimesis_rl.data.jsonl import DataError, read_conversations
from tasks import label as stage

pytestmark = pytest.mark.integration


def _project(tmp_path: Path, fixtures_dir: Path, extra: str = "") -> Path:
    splits = tmp_path / "data" / "processed" / "splits"
    splits.mkdir(parents=True)
    for split in ("train", "val", "test"):
        shutil.copy(fixtures_dir / "label" / "unseen.jsonl", splits / f"{split}.jsonl")
    params = tmp_path / "params.yaml"
    params.write_text(
        "profile: tiny\nseed: 1\nprofiles: {tiny: {}}\n"
        "label:\n  backend: rules\n  evaluate: [rules]\n  max_bad_share: 0.2\n" + extra
    )
    return params


def test_stage_labels_splits_and_reports(
    tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = _project(tmp_path, fixtures_dir)
    monkeypatch.chdir(tmp_path)
    metrics = stage.main(stage.STAGE, stage.run, stage.inputs, argv=["--params", str(params)])

    for split in ("train", "val", "test"):
        labeled = read_conversations(tmp_path / "data" / "processed" / "labeled" / f"{split}.jsonl")
        assert len(labeled) == 3
        assert all(t.patterns is not None for c in labeled for t in c.user_turns)
    assert metrics["user_turns"] == 24 and metrics["quarantined"] == 0
    assert set(metrics["by_source"]) == {"fixture-shop", "fixture-chat", "fixture-help"}
    assert 0 < metrics["eval"]["rules"]["macro_f1"] <= 1
    assert metrics["kappa"]["macro"] > 0
    # cross-source first: every real gold source held out in turn (rules need no refit)
    assert 0 < metrics["cross_source"]["rules"]["chitchat"]["macro_f1"] <= 1
    assert metrics["cross_source"]["rules"]["min"] <= metrics["cross_source"]["rules"]["mean"]
    card = json.loads((tmp_path / "reports" / "label" / "labelers.json").read_text())
    assert card["cross_source"]["rules"]["chitchat"]["patterns_scored"]
    if "casino" not in card["gold_unavailable"]:  # CaSiNo in ../shared: its annotations are checked too
        assert 0 <= metrics["casino_annotations"]["rules"]["mean_f1"] <= 1
        assert "casino" in metrics["cross_source"]["rules"]
    assert json.loads((tmp_path / "metrics" / "label.json").read_text())["backend"] == "rules"
    report = tmp_path / "reports" / "label"
    for name in ("labelers.md", "f1_by_pattern.png", "confusion_rules.png", "pattern_distribution.png"):
        assert (report / name).stat().st_size > 0, name
    assert json.loads((tmp_path / "models" / "labeler" / "status.json").read_text())["fitted"] == []

    run = mlflow.search_runs(search_all_experiments=True, output_format="list")[0]
    assert run.data.tags["mimesis.stage"] == "label"
    assert run.data.metrics["eval.rules.macro_f1"] == pytest.approx(metrics["eval"]["rules"]["macro_f1"])
    assert run.data.metrics["cross_source.rules.chitchat.macro_f1"] == pytest.approx(
        metrics["cross_source"]["rules"]["chitchat"]["macro_f1"]
    )
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id, "label/plots")}
    assert "label/plots/pattern_distribution.png" in artifacts


def test_too_many_bad_records_fail_without_partial_output(
    tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = _project(tmp_path, fixtures_dir)
    shutil.copy(
        fixtures_dir / "label" / "bad_pattern.jsonl", tmp_path / "data" / "processed" / "splits" / "val.jsonl"
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match=r"val\.jsonl: 1 of 2 records are bad .* line 2 turns\[1\]\.patterns"):
        stage.main(stage.STAGE, stage.run, stage.inputs, argv=["--params", str(params)])
    assert not (tmp_path / "data" / "processed" / "labeled").exists()
    assert not list((tmp_path / "data" / "processed").glob(".labeled*"))
    quarantined = [
        json.loads(x) for x in (tmp_path / "reports" / "label" / "quarantine.jsonl").read_text().splitlines()
    ]
    assert quarantined[0]["field"] == "turns[1].patterns"
    run = mlflow.search_runs(search_all_experiments=True, output_format="list")[0]
    assert run.info.status == "FAILED"
