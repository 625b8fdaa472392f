"""`mimesis data ingest` through typer's CliRunner: exit codes 0 / 1 / 2 and both files written."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from mimesis_rl.cli import app
from mimesis_rl.data.jsonl import read_conversations

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, ["data", "ingest", *args])


def test_ingest_casino_fixture(fixtures_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "casino.jsonl"
    result = invoke(
        "--adapter",
        "casino",
        "--input",
        str(fixtures_dir / "corpora" / "casino_small.json"),
        "--output",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert "wrote 4 conversations (2 dialogues)" in result.output
    convs = read_conversations(out)
    assert all(c.goal and c.goal.slots["priority_high"] for c in convs)
    assert (tmp_path / "casino.rejects.jsonl").read_text() == ""


def test_ingest_real_casino_valid(casino_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "casino.jsonl"
    result = invoke(
        "--adapter", "casino", "--input", str(casino_dir / "casino_valid.json"), "--output", str(out)
    )
    assert result.exit_code == 0, result.output
    convs = read_conversations(out)
    assert len(convs) == 60 and all("reason_high" in c.goal.private for c in convs)


def test_bad_share_exits_1_and_still_writes_both_files(fixtures_dir: Path, tmp_path: Path) -> None:
    out, rejects = tmp_path / "logs.jsonl", tmp_path / "rejects.jsonl"
    result = invoke(
        "--adapter",
        "messages",
        "--input",
        str(fixtures_dir / "corpora" / "openai.jsonl"),
        "--output",
        str(out),
        "--rejects",
        str(rejects),
        "--domain",
        "support",
    )
    assert result.exit_code == 1
    assert "openai.jsonl:4: messages[1].role: unknown role 'narrator'" in result.output
    assert "max_bad_share" in result.output
    assert len(read_conversations(out)) == 2 and len(rejects.read_text().splitlines()) == 3
    relaxed = invoke(
        "--adapter",
        "messages",
        "--input",
        str(fixtures_dir / "corpora" / "openai.jsonl"),
        "--output",
        str(out),
        "--max-bad-share",
        "0.9",
    )
    assert relaxed.exit_code == 0, relaxed.output


def test_unknown_adapter_and_missing_file_exit_2(tmp_path: Path) -> None:
    result = invoke("--adapter", "csv", "--input", "x", "--output", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2
    assert "unknown adapter 'csv'; known adapters: casino, chitchat, messages" in result.output
    missing = tmp_path / "missing.json"
    result = invoke("--adapter", "chitchat", "--input", str(missing), "--output", str(tmp_path / "o.jsonl"))
    assert result.exit_code == 2
    assert f"{missing}: input file not found" in result.output
    assert not (tmp_path / "o.jsonl").exists()
