"""The `base_model` stage through the shared stage runner, tiny profile, on a fixture corpus."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
import yaml

from mimesis_rl.models import load_base, read_manifest
from tasks import base_model as stage
from tasks._runner import main

pytestmark = pytest.mark.integration
REPO_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


def test_tiny_profile_builds_base_and_logs_metrics(tmp_path: Path, fixtures_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = fixtures_dir / "models" / "conversations_small.jsonl"
    params = yaml.safe_load(REPO_PARAMS.read_text())
    params["base_model"]["tiny"].update(tokenizer_corpus=str(corpus), hidden_size=32, intermediate_size=64,
                                        vocab_size=400)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)

    metrics = main(stage.STAGE, stage.run, stage.inputs, argv=["--params", str(path), "--profile", "tiny"])

    assert metrics["kind"] == "tiny" and metrics["bad_records_skipped"] == 1
    assert json.loads(Path("metrics/base_model.json").read_text()) == metrics
    manifest = read_manifest("models/base")
    assert manifest["param_count"] == metrics["param_count"]
    assert manifest["vocab_size"] == metrics["vocab_size"]
    assert 1 <= metrics["smoke"]["new_tokens"] <= 16
    model, tokenizer = load_base("models/base", device="cpu")
    assert model.config.hidden_size == 32 and len(tokenizer) == metrics["vocab_size"] <= 400
    run = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")[0]
    assert run.info.status == "FINISHED"
    assert run.data.metrics["param_count"] == float(metrics["param_count"])
    assert run.data.metrics["smoke.new_tokens"] == float(metrics["smoke"]["new_tokens"])
    assert any(key.endswith("conversations_small.jsonl") for key in run.data.tags)


def test_missing_corpus_fails_the_run_naming_the_file(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    params = yaml.safe_load(REPO_PARAMS.read_text())
    params["base_model"]["tiny"]["tokenizer_corpus"] = "data/raw/nope.jsonl"
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="nope.jsonl"):
        main(stage.STAGE, stage.run, stage.inputs, argv=["--params", str(path), "--profile", "tiny"])
    run = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")[0]
    assert run.info.status == "FAILED"
    assert not Path("models/base").exists()
