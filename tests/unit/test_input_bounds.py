"""Every byte of input ends in exactly one place: valid output or quarantine with a reason, whatever
the JSON holds (huge numbers, non-finite numbers, deep nesting) and whatever the path is (special
files, over-long lines, symlinked outputs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mimesis_rl.data.adapters.base import load_json_document
from mimesis_rl.data.jsonl import DataError, iter_jsonl
from mimesis_rl.data.validation import TooManyBadRecords, ValidationSettings, validate_file
from mimesis_rl.fsutil import PathError, atomic_open, check_input_file

GOOD = {"conversation_id": "c1", "source": "s", "domain": "d",
        "turns": [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hello"}]}


def _with(cid: str, extra: str) -> str:
    """GOOD with a raw JSON fragment spliced in as a `persona` value (raw: no encoder may fix it)."""
    text = json.dumps(dict(GOOD, conversation_id=cid))
    return text.replace('"domain": "d"', f'"domain": "d", "persona": {extra}')


BAD_VALUES = {
    "5000 digits": ('{"n": ' + "9" * 5000 + "}", "an integer of 5000 digits is out of the 64-bit range"),
    "1e400": ('{"x": 1e400}', "1e400 overflows a float"),
    "-1e400": ('{"x": -1e400}', "overflows a float"),
    "NaN": ('{"x": NaN}', "NaN is not standard JSON"),
    "Infinity": ('{"x": Infinity}', "Infinity is not standard JSON"),
    "nested 100k": ('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 64 levels"),
    "nested 100": ('{"x": ' + "[" * 100 + "]" * 100 + "}", "nested deeper than 64 levels"),
}


def _validate(tmp_path: Path, lines: list[str], **config: object):
    source, valid, quarantine = tmp_path / "in.jsonl", tmp_path / "valid.jsonl", tmp_path / "q.jsonl"
    source.write_text("\n".join(lines) + "\n")
    try:
        config = ValidationSettings(max_bad_share=1.0, **config)
        report = validate_file(source, valid, quarantine, config=config)
    except TooManyBadRecords as exc:
        report = exc.report
    rows = [json.loads(x) for x in quarantine.read_text().splitlines()]
    return report, valid.read_text().splitlines(), rows


def test_unrepresentable_values_are_quarantined_with_their_reason(tmp_path: Path) -> None:
    bad = [_with(f"c{i}", extra) for i, (extra, _) in enumerate(BAD_VALUES.values(), 2)]
    lines = [json.dumps(GOOD), *bad]
    report, valid, rows = _validate(tmp_path, lines)
    assert report.records == len(lines) and len(valid) == 1 and len(rows) == len(BAD_VALUES)
    for row, (_, reason) in zip(rows, BAD_VALUES.values(), strict=True):
        assert reason in row["reason"], row["reason"]


def test_a_whole_document_corpus_with_a_huge_number_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "corpus.json"
    path.write_text('{"a": ' + "1" * 5000 + "}")
    with pytest.raises(DataError, match="corpus.json: malformed JSON: an integer of 5000 digits"):
        load_json_document(path, dict)


def test_an_over_long_line_is_quarantined_without_being_read_whole(tmp_path: Path) -> None:
    long = _with("c2", json.dumps({"blob": "x" * 5000}))
    other = json.dumps(GOOD).replace('"c1"', '"c3"').replace("hi there", "good day")
    report, valid, rows = _validate(tmp_path, [json.dumps(GOOD), long, other], max_line_bytes=1000)
    assert report.records == 3 and len(valid) == 2 and len(rows) == 1
    assert rows[0]["line"] == 2 and "line too long" in rows[0]["reason"] and rows[0]["raw_truncated"] is True
    assert rows[0]["line_bytes"] == len(long.encode()) and len(rows[0]["raw"]) < len(long)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_device_is_refused_before_reading() -> None:
    with pytest.raises(PathError, match="/dev/zero: input is a device, not a regular file"):
        check_input_file("/dev/zero")
    with pytest.raises(DataError, match="is a device"):
        list(iter_jsonl("/dev/zero"))


def test_a_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(PathError, match=r"named pipe \(FIFO\)"):
        check_input_file(fifo)
    with pytest.raises(DataError, match="named pipe"):
        validate_file(fifo, tmp_path / "v.jsonl", tmp_path / "q.jsonl")


def test_a_symlinked_output_is_written_through_not_replaced(tmp_path: Path) -> None:
    target, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    target.write_text("old\n")
    link.symlink_to(target)
    with atomic_open(link) as handle:
        handle.write("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(GOOD) + "\n")
    validate_file(source, link, tmp_path / "q.jsonl")
    assert link.is_symlink() and json.loads(target.read_text())["conversation_id"] == "c1"


def test_a_symlink_loop_is_a_clear_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.symlink_to(b)
    b.symlink_to(a)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(GOOD) + "\n")
    with pytest.raises(DataError, match="a.jsonl: output is a symlink that cannot be followed"):
        validate_file(source, a, tmp_path / "q.jsonl")
    with pytest.raises(DataError, match="a.jsonl: input cannot be opened"):
        validate_file(a, tmp_path / "v.jsonl", tmp_path / "q.jsonl")


def test_a_symlinked_output_folder_is_written_through(tmp_path: Path) -> None:
    from mimesis_rl.fsutil import swap_in_dir

    real, link = tmp_path / "store" / "splits", tmp_path / "splits"
    real.mkdir(parents=True)
    (real / "old.jsonl").write_text("old\n")
    link.symlink_to(real)
    staged = tmp_path / ".splits.tmp"
    staged.mkdir()
    (staged / "train.jsonl").write_text("new\n")
    swap_in_dir(staged, link)
    assert link.is_symlink() and sorted(p.name for p in real.iterdir()) == ["train.jsonl"]
    assert not staged.exists() and not list((tmp_path / "store").glob(".*"))
