"""Nothing altered without a trace: non-text message parts stay (placeholder + original in meta),
invisible characters are flagged, personal data is redacted by default and the report counts it."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mimesis_rl.cli import app
from mimesis_rl.data.adapters import get_adapter
from mimesis_rl.data.chars import suspicious_chars
from mimesis_rl.data.jsonl import BadRecord
from mimesis_rl.data.validation import ValidationSettings, validate_file

IMAGE = {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}
AUDIO = {"type": "input_audio", "x": 1}


def test_an_image_part_becomes_a_placeholder_with_the_original_in_meta(tmp_path: Path) -> None:
    line = {"messages": [
        {"role": "system", "content": [{"type": "text", "text": "be brief"}, AUDIO]},
        {"role": "user", "content": [{"type": "text", "text": "what is this?"}, IMAGE]},
        {"role": "assistant", "content": "a cat"},
        {"role": "user", "content": [IMAGE]},
        {"role": "assistant", "content": "the same cat"},
    ]}
    path = tmp_path / "logs.jsonl"
    path.write_text(json.dumps(line) + "\n")
    [conv] = list(get_adapter("messages").read(path))
    assert not isinstance(conv, BadRecord)
    first, _, only_image, _ = conv.turns
    assert first.content == "what is this?\n[image]"
    assert first.meta["non_text_parts"] == [{"index": 1, "part": IMAGE}]
    assert only_image.content == "[image]" and only_image.meta["non_text_parts"][0]["part"] == IMAGE
    assert conv.meta["system_non_text_parts"] == [{"message": 0, "index": 1, "part": AUDIO}]


def test_a_malformed_part_is_rejected_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl"
    bad = {"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}, {"role": "assistant",
                                                                                      "content": "ok"}]}
    path.write_text(json.dumps(bad) + "\n")
    [item] = list(get_adapter("messages").read(path))
    assert isinstance(item, BadRecord) and item.field == "messages[0].content[0].text"


def test_suspicious_characters() -> None:
    assert suspicious_chars("plain\ttext\nok\r") == []
    assert suspicious_chars("a\x00b") == ["nul"]
    assert suspicious_chars("a\x1bb\u202e") == ["control", "bidi_override"]
    assert suspicious_chars("x\ud800") == ["surrogate"]


def _conv(cid: str, text: str) -> str:
    return json.dumps({"conversation_id": cid, "source": "s", "domain": "d",
                       "turns": [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]})


def test_nul_and_bidi_are_flagged_and_pii_redacted_by_default(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    lines = [_conv("a", "hello\x00 there"), _conv("b", "pay \u202eevil\u202c now"),
             _conv("c", "mail jane.doe@example.org or jane@example.com"), _conv("d", "nothing odd")]
    source.write_text("\n".join(lines) + "\n")
    assert ValidationSettings().pii_action == "redact"
    report = validate_file(source, tmp_path / "v.jsonl", tmp_path / "q.jsonl", report_dir=tmp_path / "r")
    assert report.valid == 4 and report.quarantined == 0
    metrics = report.metrics()
    assert metrics["flagged"] == {"suspicious_chars": 2}
    flagged = report.flagged_lines()
    assert "in.jsonl:1: turns[0].content: content holds a NUL character" in flagged[0]
    assert "in.jsonl:2: turns[0].content: content holds a bidirectional override" in flagged[1]
    assert metrics["pii"]["redacted_values"] == 2 and metrics["pii"]["redacted"] == {"email": 2}
    valid = (tmp_path / "v.jsonl").read_text().splitlines()
    assert json.loads(valid[2])["turns"][0]["content"] == "mail [EMAIL] or [EMAIL]"
    assert valid[0] == lines[0]  # flagged, kept byte for byte
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["flagged"] == {"suspicious_chars": 2} and len(summary["flagged_turns"]) == 2


def test_the_cli_says_how_many_values_were_redacted_and_flag_opts_out(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(_conv("c", "call +44 20 7946 0958 or mail a@b.org") + "\n" + _conv("d", "x\x00") + "\n")
    args = ["data", "validate", "--input", str(source), "--output", str(tmp_path / "v.jsonl"),
            "--quarantine", str(tmp_path / "q.jsonl")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "PII redacted: 1 turns in 1 records; 2 values redacted" in result.output
    assert "flagged (kept):" in result.output and "NUL" in result.output
    kept = CliRunner().invoke(app, [*args, "--pii-action", "flag"])
    assert kept.exit_code == 0 and "PII flagged" in kept.output
    assert "7946 0958" in (tmp_path / "v.jsonl").read_text()
