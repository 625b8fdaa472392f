"""The `ingest` and `split` stages through the shared stage runner, on fixture corpora."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
import yaml

from mimesis_rl.data.jsonl import DataError, read_conversations
from mimesis_rl.data.splitting import group_id
from tasks import ingest as ingest_stage
from tasks import split as split_stage
from tasks._runner import main

pytestmark = pytest.mark.integration
REPO_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


@pytest.fixture
def params_file(tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project's params.yaml, pointed at the fixture corpora; the stages run inside tmp_path."""
    corpora = fixtures_dir / "corpora"
    params = yaml.safe_load(REPO_PARAMS.read_text())
    params["ingest"]["sources"] = [
        {"adapter": "chitchat", "input": str(corpora / "chitchat_small.json")},
        {"adapter": "casino", "input": str(corpora / "casino_small.json")},
        {"adapter": "messages", "input": str(corpora / "sharegpt.jsonl"), "domain": "books"},
    ]
    params["ingest"]["max_bad_share"] = 0.5
    params["split"]["input"] = params["ingest"]["output"]  # validate is another stage's business
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    return path


def test_ingest_then_split(params_file: Path) -> None:
    metrics = main(
        ingest_stage.STAGE,
        ingest_stage.run,
        ingest_stage.inputs,
        argv=["--params", str(params_file), "--profile", "tiny"],
    )
    assert metrics["conversations"] == 10 and metrics["bad_records"] == 3 and metrics["excluded_records"] == 1
    assert json.loads(Path("metrics/ingest.json").read_text()) == metrics
    assert len(Path("data/raw/ingest_rejects.jsonl").read_text().splitlines()) == 4
    run = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")[0]
    assert run.data.metrics["conversations"] == 10.0 and run.data.metrics["by_domain.campsite"] == 4.0
    assert any(
        key.startswith("mimesis.input.") and key.endswith("casino_small.json") for key in run.data.tags
    )

    split = main(
        split_stage.STAGE,
        split_stage.run,
        split_stage.inputs,
        argv=["--params", str(params_file), "--profile", "tiny"],
    )
    assert split["input"] == 10 and split["groups_in_several_splits"] == 0
    out = Path("data/processed/splits")
    assert sorted(p.name for p in out.iterdir()) == ["test.jsonl", "train.jsonl", "val.jsonl"]
    parts = {name: read_conversations(out / f"{name}.jsonl") for name in ("train", "val", "test")}
    assert sum(len(v) for v in parts.values()) == 10
    groups = [{group_id(c) for c in convs} for convs in parts.values()]
    assert not (groups[0] & groups[1] or groups[0] & groups[2] or groups[1] & groups[2])

    # same inputs, same seed: byte-identical outputs
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    main(split_stage.STAGE, split_stage.run, split_stage.inputs, argv=["--params", str(params_file)])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_ingest_fails_past_the_threshold_and_the_run_is_failed(params_file: Path) -> None:
    params = yaml.safe_load(params_file.read_text())
    params["ingest"]["max_bad_share"] = 0.05
    params_file.write_text(yaml.safe_dump(params))
    with pytest.raises(DataError, match="source records are bad"):
        main(ingest_stage.STAGE, ingest_stage.run, ingest_stage.inputs, argv=["--params", str(params_file)])
    run = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")[0]
    assert run.info.status == "FAILED"
    assert Path("data/raw/ingest_rejects.jsonl").exists()
