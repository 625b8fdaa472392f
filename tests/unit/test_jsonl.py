"""JSONL reading and writing: every bad line named by file, line and field; writes are atomic."""

from __future__ import annotations

import base64
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


def test_strict_utf8_per_line_and_a_bom_opening_the_file(tmp_path: Path) -> None:
    good = json.dumps(GOOD).encode()
    latin = json.dumps(dict(GOOD, conversation_id="café"), ensure_ascii=False).encode()
    latin = latin.replace("é".encode(), b"\xe9")  # Latin-1, not UTF-8
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + good + b"\r\n" + latin + b"\n" + good)
    items = list(iter_jsonl(path))
    assert items[0] == (1, GOOD)  # the BOM is not part of the first record
    bad = items[1][1]
    assert isinstance(bad, BadRecord) and bad.reason.startswith("not UTF-8 at byte")
    assert base64.b64decode(bad.to_quarantine()["raw_base64"]) == latin  # the exact bytes are kept
    assert "\ufffd" not in bad.raw
    assert items[2] == (3, GOOD)  # a last line without newline is still a record


@pytest.mark.parametrize(("text", "reason"), [
    ('{"a": 1, "a": 2}', "key 'a' appears twice in one object"),
    ('{"a": NaN}', "NaN is not standard JSON"),
    ('{"a": "\\ud800"}', "lone surrogate \\ud800"),
    ("\u00a0", "malformed JSON"),
    ("[" * 100000, "malformed JSON"),
])
def test_lines_that_would_pass_altered_are_bad_records(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(text + "\n", encoding="utf-8")
    [(line, bad)] = list(iter_jsonl(path))
    assert line == 1 and isinstance(bad, BadRecord) and reason in bad.reason, bad


def test_paired_surrogates_and_escaped_backslashes_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": "\\ud83d\\ude00", "b": "\\\\ud800"}\n', encoding="utf-8")
    assert list(iter_jsonl(path)) == [(1, {"a": "\U0001f600", "b": "\\ud800"})]
