"""The `validate` stage through the shared runner (metrics file, MLflow run and artifacts) and the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from mimesis_rl.cli import app
from mimesis_rl.data.jsonl import write_jsonl
from mimesis_rl.data.schema import Conversation, Turn
from mimesis_rl.data.validation import TooManyBadRecords

pytestmark = pytest.mark.integration


def _corpus(path: Path, good: int, bad_lines: list[str]) -> None:
    """`good` schema-valid conversations (built with the schema itself), then the bad lines."""
    write_jsonl(path, [
        Conversation(conversation_id=f"c{i}", source="unit", domain="chat", turns=[
            Turn(role="user", content=f"hello number {i}", patterns=["vague_request"] if i % 3 == 0 else []),
            Turn(role="assistant", content=f"hi there, {i}"),
        ]) for i in range(good)
    ])
    with path.open("a") as handle:
        handle.writelines(line + "\n" for line in bad_lines)


def _params(tmp_path: Path, max_bad_share: float) -> Path:
    params = {
        "profile": "tiny", "seed": 1,
        "validate": {
            "input": str(tmp_path / "data/raw/conversations.jsonl"),
            "output": str(tmp_path / "data/interim/conversations.valid.jsonl"),
            "quarantine": str(tmp_path / "data/interim/quarantine.jsonl"),
            "report_dir": str(tmp_path / "reports/validation"),
            "max_bad_share": max_bad_share, "min_chars": 1, "max_chars": 4000,
            "min_turns": 2, "max_turns": 200, "pii_action": "flag",
        },
        "profiles": {"tiny": {}},
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def _stage_runs() -> list[mlflow.entities.Run]:
    client = MlflowClient()
    experiments = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(experiments, filter_string="tags.`mimesis.stage` = 'validate'")


def test_stage_writes_outputs_metrics_and_mlflow_artifacts(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks._runner import main
    from tasks.validate import STAGE, inputs, run

    monkeypatch.chdir(tmp_path)
    _corpus(tmp_path / "data/raw/conversations.jsonl", good=30,
            bad_lines=['{"conversation_id": "broken"', json.dumps({"conversation_id": "c1", "source": "x"})])
    params = _params(tmp_path, max_bad_share=0.1)
    metrics = main(STAGE, run, inputs, argv=["--params", str(params)])

    assert (metrics["records"], metrics["valid"], metrics["quarantined"]) == (32, 30, 2)
    assert metrics["reasons"] == {"json": 1, "schema.domain": 1}
    assert json.loads((tmp_path / "metrics/validate.json").read_text())["valid"] == 30
    assert len((tmp_path / "data/interim/conversations.valid.jsonl").read_text().splitlines()) == 30
    assert len((tmp_path / "data/interim/quarantine.jsonl").read_text().splitlines()) == 2

    [stage_run] = _stage_runs()
    assert stage_run.info.status == "FINISHED"
    assert stage_run.data.metrics["bad_share"] == pytest.approx(2 / 32)
    assert stage_run.data.metrics["reasons.json"] == 1
    assert stage_run.data.tags["mimesis.validate.gx_success"] == "true"
    artifacts = MlflowClient().download_artifacts(stage_run.info.run_id, "validation", str(tmp_path / "dl"))
    assert (Path(artifacts) / "gx_validation_result.json").is_file()
    assert (Path(artifacts) / "data_docs" / "index.html").is_file()


def test_stage_past_threshold_fails_after_writing_and_logs_its_numbers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixtures_dir: Path) -> None:
    from tasks._runner import main
    from tasks.validate import STAGE, inputs, run

    monkeypatch.chdir(tmp_path)
    raw = tmp_path / "data/raw/conversations.jsonl"
    raw.parent.mkdir(parents=True)
    shutil.copy(fixtures_dir / "bad_conversations.jsonl", raw)
    params = _params(tmp_path, max_bad_share=0.05)
    with pytest.raises(TooManyBadRecords, match=r"conversations.jsonl:2: malformed JSON"):
        main(STAGE, run, inputs, argv=["--params", str(params)])

    assert (tmp_path / "data/interim/quarantine.jsonl").is_file()
    assert not (tmp_path / "metrics/validate.json").exists()
    [stage_run] = _stage_runs()
    assert stage_run.info.status == "FAILED"
    assert stage_run.data.metrics["quarantined"] == 9
    assert stage_run.data.metrics["pii.turns"] == 2
    names = {a.path for a in MlflowClient().list_artifacts(stage_run.info.run_id, "validation")}
    assert "validation/gx_validation_result.json" in names


def test_cli_validate_exit_codes_and_bad_lines(tmp_path: Path, fixtures_dir: Path) -> None:
    source = fixtures_dir / "bad_conversations.jsonl"
    valid, quarantine = tmp_path / "valid.jsonl", tmp_path / "quarantine.jsonl"
    args = ["data", "validate", "--input", str(source), "--output", str(valid),
            "--quarantine", str(quarantine)]
    runner = CliRunner()

    failed = runner.invoke(app, args + ["--report-dir", str(tmp_path / "report")])
    assert failed.exit_code == 1, failed.output
    assert valid.is_file() and quarantine.is_file()
    assert "9 of 15 records are bad" in failed.output
    for needle in (":2: malformed JSON", ":3: turns[1].content: ", ":4: turns[1].role: ",
                   ":6: conversation_id: ", ":7: turns[0].patterns: ",
                   ":10: turns: same turns as the record on line 5", ":11: turns: no user turn",
                   ":12: expected a JSON object", ":13: turns: "):
        assert f"bad: {source}{needle}" in failed.output, needle
    assert (tmp_path / "report" / "gx_validation_result.json").is_file()
    assert len(valid.read_text().splitlines()) + len(quarantine.read_text().splitlines()) == 15

    passed = runner.invoke(app, args + ["--max-bad-share", "0.7"])
    assert passed.exit_code == 0, passed.output
    assert "PII redacted: 2 turns in 2 records; 2 values redacted" in passed.output  # the default

    missing = runner.invoke(app, ["data", "validate", "--input", str(tmp_path / "none.jsonl"),
                                  "--output", str(valid), "--quarantine", str(quarantine)])
    assert missing.exit_code == 2 and "none.jsonl: file not found" in missing.output
