"""The `rationalize` stage through the shared runner, and its Great Expectations output check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mimesis_rl.behavior.reasoning.expectations import check_reasoning_output
from mimesis_rl.data.jsonl import DataError, read_conversations, write_jsonl

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reasoning" / "conversations.jsonl"
SPLITS = {"train": slice(0, 4), "val": slice(4, 5), "test": slice(5, 6)}


def _labeled(root: Path) -> None:
    conversations = read_conversations(FIXTURE)
    for split, part in SPLITS.items():
        write_jsonl(root / "data/processed/labeled" / f"{split}.jsonl", conversations[part])


def _params(root: Path) -> Path:
    section = {"input_dir": "data/processed/labeled", "output_dir": "data/processed/conversations",
               "report_dir": "reports/rationalize", "backend": "template", "chunk_size": 2}
    params = {"profile": "tiny", "seed": 3, "rationalize": section, "profiles": {"tiny": {}}}
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def _run(params: Path) -> dict:
    from tasks._runner import main
    from tasks.rationalize import STAGE, inputs, run

    return main(STAGE, run, inputs, argv=["--params", str(params)])


def test_stage_writes_reasoning_on_every_user_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _labeled(tmp_path)
    metrics = _run(_params(tmp_path))

    source = read_conversations(FIXTURE)
    user_turns = sum(1 for c in source for t in c.turns if t.role == "user")
    assert metrics["user_turns"] == user_turns and metrics["share_with_reasoning"] == 1.0
    assert metrics["fallbacks"] == 0 and metrics["kept_existing"] == 1
    assert 0.5 < metrics["distinct_trigram_ratio"] <= 1.0 and metrics["mean_words"] > 5
    assert {s: m["conversations"] for s, m in metrics["splits"].items()} == {"train": 4, "val": 1, "test": 1}
    assert json.loads((tmp_path / "metrics/rationalize.json").read_text())["user_turns"] == user_turns

    written = [c for split in SPLITS
               for c in read_conversations(tmp_path / "data/processed/conversations" / f"{split}.jsonl")]
    assert [c.conversation_id for c in written] == [c.conversation_id for c in source]
    for before, after in zip(source, written, strict=True):
        assert before.model_dump(exclude={"turns"}) == after.model_dump(exclude={"turns"})
        for old, new in zip(before.turns, after.turns, strict=True):
            assert old.model_dump(exclude={"reasoning"}) == new.model_dump(exclude={"reasoning"})
            assert (new.reasoning is not None) == (new.role == "user")
    report = json.loads((tmp_path / "reports/rationalize/gx_validation_result.json").read_text())
    assert report["success"] is True


def test_bad_input_fails_naming_the_line_and_keeps_previous_outputs(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _labeled(tmp_path)
    params = _params(tmp_path)
    _run(params)
    out_dir = tmp_path / "data/processed/conversations"
    before = {p.name: p.read_text() for p in out_dir.iterdir()}

    bad = tmp_path / "data/processed/labeled/val.jsonl"
    record = json.loads(bad.read_text().splitlines()[0])
    record["turns"][0]["patterns"] = ["mind_reading"]
    bad.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataError, match=r"val.jsonl:1: turns\[0\]\.patterns: .*mind_reading"):
        _run(params)
    assert {p.name: p.read_text() for p in out_dir.iterdir()} == before
    assert not (tmp_path / "data/processed/.conversations.tmp").exists()


def test_output_check_names_conversation_and_turn(tmp_path: Path) -> None:
    good = "I want them to know I'm in a hurry, so I skip the small talk."
    records = [
        {"conversation_id": "ok", "turns": [
            {"role": "user", "content": "Hi, I need a taxi.", "reasoning": good,
             "patterns": ["vague_request"]},
            {"role": "assistant", "content": "Where to?"}]},
        {"conversation_id": "bad", "turns": [
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Hi, I need a taxi now.", "reasoning": "hi, I need a TAXI now"},
            {"role": "assistant", "content": "Where to?"},
            {"role": "user", "content": "Airport."},
            {"role": "assistant", "content": "Sure."},
            {"role": "user", "content": "Thanks!", "reasoning": "   ", "patterns": ["telepathy"]}]},
    ]
    path = tmp_path / "out.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))

    check = check_reasoning_output([path])
    assert not check.success and check.rows == 4
    found = {(f.check, f.conversation_id, f.turn) for f in check.failures}
    assert found == {("reasoning_differs", "bad", 1), ("has_reasoning", "bad", 3),
                     ("reasoning_not_blank", "bad", 5), ("known_patterns", "bad", 5)}
    with pytest.raises(DataError) as err:
        check.raise_if_failed()
    text = str(err.value)
    assert "failed on 4 user turn(s)" in text
    assert "out.jsonl:2: conversation 'bad' turn 1: reasoning repeats the message (equal to" in text
    assert "unknown pattern names ['telepathy']" in text
