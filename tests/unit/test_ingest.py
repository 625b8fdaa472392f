"""Ingest over several sources: counts, the rejects file, the source limit and the bad-share gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimesis_rl.data.ingest import SourceSpec, ingest
from mimesis_rl.data.jsonl import DataError, read_conversations


@pytest.fixture
def specs(fixtures_dir: Path) -> list[SourceSpec]:
    corpora = fixtures_dir / "corpora"
    return [
        SourceSpec("chitchat", str(corpora / "chitchat_small.json")),
        SourceSpec("casino", str(corpora / "casino_small.json")),
        SourceSpec("messages", str(corpora / "sharegpt.jsonl"), {"domain": "books"}),
    ]


def test_ingest_writes_conversations_and_every_reject(specs: list[SourceSpec], tmp_path: Path) -> None:
    out, rejects = tmp_path / "raw" / "conversations.jsonl", tmp_path / "raw" / "rejects.jsonl"
    report = ingest(specs, out, rejects)
    convs = read_conversations(out)
    assert len(convs) == report.conversations == 4 + 4 + 2
    assert report.source_records == 2 + 2 + 2
    assert report.metrics()["by_source"] == {"casino": 4, "chitchat": 4, "sharegpt": 1, "sharegpt_demo": 1}
    assert report.metrics()["by_domain"] == {"books": 2, "campsite": 4, "chitchat": 4}
    assert report.user_turns == sum(len(c.user_turns) for c in convs)

    lines = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [(r["kind"], r["adapter"], r["line"]) for r in lines] == [
        ("bad", "chitchat", 4),
        ("bad", "messages", 3),
        ("bad", "messages", 4),
        ("excluded", "chitchat", 3),
    ]
    assert {"source_file", "field", "reason", "raw", "input"} <= set(lines[0])
    # records read = mapped + bad + excluded; excluded monologues do not count as bad
    assert report.records_read == 6 + 3 + 1
    assert report.bad_share == pytest.approx(3 / 10)
    assert report.per_input[specs[0].label] == {"conversations": 4, "bad": 1, "excluded": 1}


def test_bad_share_gate_names_the_first_bad_records(specs: list[SourceSpec], tmp_path: Path) -> None:
    report = ingest(specs, tmp_path / "c.jsonl", tmp_path / "r.jsonl")
    report.check(max_bad_share=0.5)
    with pytest.raises(
        DataError, match=r"3 of 10 source records are bad \(30.0% > max_bad_share 5.0%\)"
    ) as info:
        report.check(max_bad_share=0.05)
    assert "chitchat_small.json:4: conv-4.messages[1][0].text" in str(info.value)
    assert (tmp_path / "r.jsonl").exists()  # the rejects are there to inspect


def test_limit_counts_dialogues_not_views(specs: list[SourceSpec], tmp_path: Path) -> None:
    report = ingest(specs, tmp_path / "c.jsonl", tmp_path / "r.jsonl", limit_per_source=1)
    ids = [c.conversation_id for c in read_conversations(tmp_path / "c.jsonl")]
    assert ids == ["chitchat-conv-1-a", "chitchat-conv-1-b", "casino-1001-a", "casino-1001-b", "sharegpt-1"]
    assert report.source_records == 3


def test_nothing_mapped_fails(tmp_path: Path) -> None:
    logs = tmp_path / "logs.jsonl"
    logs.write_text('{"messages": []}\n')
    report = ingest([SourceSpec("messages", str(logs))], tmp_path / "c.jsonl", tmp_path / "r.jsonl")
    with pytest.raises(DataError, match="no conversations"):
        report.check(max_bad_share=1.0)


def test_unknown_adapter_or_missing_input_writes_nothing(specs: list[SourceSpec], tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    with pytest.raises(DataError, match="unknown adapter 'nope'"):
        ingest([*specs, SourceSpec("nope", "x")], out, tmp_path / "r.jsonl")
    with pytest.raises(DataError, match="missing.json: input file not found"):
        ingest([*specs, SourceSpec("casino", str(tmp_path / "missing.json"))], out, tmp_path / "r.jsonl")
    assert not out.exists()


def test_source_spec_from_params() -> None:
    spec = SourceSpec.from_params({"adapter": "messages", "input": "logs/", "domain": "support"})
    assert (spec.adapter, spec.input, dict(spec.options)) == ("messages", "logs/", {"domain": "support"})
    with pytest.raises(DataError, match="needs `adapter` and `input`"):
        SourceSpec.from_params({"adapter": "casino"})
