"""JSONL reading and writing: every bad line named by file, line and field; writes are atomic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimesis_rl.data.jsonl import (
    BadRecord,
    DataError,
    iter_conversations,
    iter_jsonl,
    read_conversations,
    write_jsonl,
)
from mimesis_rl.data.schema import Conversation

GOOD = {
    "conversation_id": "g1",
    "source": "s",
    "domain": "d",
    "turns": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_each_bad_line_is_named(tmp_path: Path) -> None:
    bad_role = dict(
        GOOD, conversation_id="g2", turns=[{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]
    )
    path = write_lines(
        tmp_path / "mixed.jsonl",
        [
            json.dumps(GOOD),
            '{"conversation_id": "broken", "turns": [',
            "",
            "[1, 2]",
            json.dumps(bad_role),
            json.dumps(dict(GOOD, conversation_id="g3")),
        ],
    )
    items = list(iter_conversations(path))
    assert [line for line, _ in items] == [1, 2, 4, 5, 6]  # the blank line 3 is skipped, not reported
    good = [item for _, item in items if isinstance(item, Conversation)]
    bad = [item for _, item in items if isinstance(item, BadRecord)]
    assert [c.conversation_id for c in good] == ["g1", "g3"]
    assert [(b.line, b.field) for b in bad] == [(2, ""), (4, ""), (5, "turns[1].role")]
    assert bad[0].reason.startswith("malformed JSON") and "column" in bad[0].reason
    assert bad[1].reason == "expected a JSON object, got list"
    assert str(bad[2]).startswith(f"{path}:5: turns[1].role: Input should be")
    assert bad[0].raw == '{"conversation_id": "broken", "turns": ['
    assert (
        bad[2].to_quarantine()["line"] == 5
        and json.loads(bad[2].to_quarantine()["raw"])["conversation_id"] == "g2"
    )


def test_strict_read_stops_at_the_first_bad_record(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "x.jsonl", [json.dumps(GOOD), json.dumps(dict(GOOD, turns=[]))])
    with pytest.raises(DataError, match=rf"^{path}:2: turns: List should have at least 2 items"):
        read_conversations(path)
    assert [
        c.conversation_id for c in read_conversations(write_lines(tmp_path / "ok.jsonl", [json.dumps(GOOD)]))
    ] == ["g1"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nope.jsonl: file not found"):
        list(iter_jsonl(tmp_path / "nope.jsonl"))


def test_write_round_trip_and_counts(tmp_path: Path) -> None:
    conv = Conversation.model_validate(GOOD)
    out = tmp_path / "sub" / "out.jsonl"
    assert write_jsonl(out, [conv, {"plain": "dict", "n": 1}]) == 2
    lines = out.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == json.loads(conv.model_dump_json(exclude_none=True))
    assert "reasoning" not in lines[0]  # None fields are left out
    assert json.loads(lines[1]) == {"plain": "dict", "n": 1}


def test_write_is_atomic(tmp_path: Path) -> None:
    out = write_lines(tmp_path / "out.jsonl", ["old"])

    def failing():
        yield {"a": 1}
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_jsonl(out, failing())
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temp file left behind


def test_non_ascii_survives(tmp_path: Path) -> None:
    conv = Conversation.model_validate(
        dict(
            GOOD,
            turns=[{"role": "user", "content": "Grüße 🙂"}, {"role": "assistant", "content": "こんにちは"}],
        )
    )
    out = tmp_path / "u.jsonl"
    write_jsonl(out, [conv])
    assert read_conversations(out)[0].turns[0].content == "Grüße 🙂"
