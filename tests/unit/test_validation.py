"""The validate flow and its Great Expectations suite, on small fixtures and hand-built tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimesis_rl.data.expectations import (
    EMAIL_REGEX,
    PHONE_REGEX,
    TURNS,
    Bounds,
    TableBuilder,
    build_suites,
    run_suites,
)
from mimesis_rl.data.jsonl import DataError, write_jsonl
from mimesis_rl.data.schema import Conversation, Turn
from mimesis_rl.data.validation import (
    GX_RESULT_FILE,
    TooManyBadRecords,
    ValidationConfig,
    validate_file,
)

# Line of tests/fixtures/bad_conversations.jsonl -> the check that must quarantine it.
EXPECTED_BAD = {
    1: "unique_conversation_id",  # its id is reused on line 6: neither copy can be trusted
    2: "json",
    3: "schema.turns.content",
    4: "schema.turns.role",
    6: "unique_conversation_id",
    7: "schema.turns.patterns",
    10: "duplicate_conversation",
    11: "has_user_turn",
    12: "json",
    13: "schema.turns",
}
PII_LINES = {8: "pii_phone", 15: "pii_email"}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _validate(tmp_path: Path, source: Path, **config: object) -> tuple[object, Path, Path]:
    valid, quarantine = tmp_path / "valid.jsonl", tmp_path / "quarantine.jsonl"
    try:
        report = validate_file(source, valid, quarantine, config=ValidationConfig(**config))
    except TooManyBadRecords as exc:
        report = exc.report
    return report, valid, quarantine


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path, Path, Path]:
    """One validation of the bad-records fixture with the report (Data Docs) written."""
    source = Path(__file__).resolve().parents[1] / "fixtures" / "bad_conversations.jsonl"
    tmp = tmp_path_factory.mktemp("validate")
    with pytest.raises(TooManyBadRecords) as info:
        validate_file(source, tmp / "valid.jsonl", tmp / "quarantine.jsonl", report_dir=tmp / "report")
    return info.value.report, source, tmp, info.value


def test_nothing_is_lost_valid_plus_quarantined_is_input(fixture_run) -> None:
    report, source, tmp, _ = fixture_run
    raw_lines = source.read_text().splitlines()
    records = {n: text for n, text in enumerate(raw_lines, start=1) if text.strip()}
    valid = (tmp / "valid.jsonl").read_text().splitlines()
    quarantined = _lines(tmp / "quarantine.jsonl")
    assert len(valid) + len(quarantined) == len(records) == report.records == 15
    assert report.blank_lines == 1
    # Each record's own line lands in exactly one file, unchanged.
    assert sorted(valid + [q["raw"] for q in quarantined]) == sorted(records.values())
    for q in quarantined:
        assert q["raw"] == records[q["line"]]


def test_each_bad_line_is_named_with_its_reason(fixture_run) -> None:
    report, source, tmp, _ = fixture_run
    quarantined = {q["line"]: q for q in _lines(tmp / "quarantine.jsonl")}
    assert set(quarantined) == set(EXPECTED_BAD)
    for line, check in EXPECTED_BAD.items():
        record = quarantined[line]
        assert check in [r["check"] for r in record["reasons"]], record
        assert record["source_file"] == str(source) and record["reason"]
    assert quarantined[4]["field"] == "turns[1].role"
    assert quarantined[3]["field"] == "turns[1].content"
    assert "line 5" in quarantined[10]["reason"]  # the first copy of the turns stays valid
    assert "line(s) 6" in quarantined[1]["reason"] and quarantined[1]["conversation_id"] == "good-1"
    assert quarantined[2]["conversation_id"] is None  # malformed JSON: no id to be had
    bad_lines = report.bad_lines()
    assert bad_lines[0].startswith(f"{source}:1: conversation_id: ")
    assert any(line.startswith(f"{source}:4: turns[1].role: ") for line in bad_lines)


def test_pii_is_flagged_but_kept_by_default(fixture_run) -> None:
    report, _, tmp, _ = fixture_run
    kept = (tmp / "valid.jsonl").read_text().splitlines()
    kept_ids = {json.loads(line)["conversation_id"] for line in kept}
    assert {"phone-1", "email-1"} <= kept_ids
    assert {f.line: f.check for f in report.pii_hits} == PII_LINES
    assert report.metrics()["pii"] == {"turns": 2, "conversations": 2, "pii_email": 1, "pii_phone": 1}
    assert report.pii_hits[0].field == "turns[0].content"


def test_threshold_error_names_first_bad_records_after_writing(fixture_run) -> None:
    report, source, tmp, error = fixture_run
    message = str(error)
    assert "10 of 15 records are bad" in message and "max_bad_share 5.00%" in message
    assert f"{source}:2: malformed JSON" in message
    assert (tmp / "valid.jsonl").exists() and (tmp / "quarantine.jsonl").exists()
    assert report.metrics()["reasons"]["json"] == 2


def test_gx_result_json_holds_every_expectation(fixture_run) -> None:
    report, _, tmp, _ = fixture_run
    result = json.loads((tmp / "report" / GX_RESULT_FILE).read_text())
    assert result["success"] is False
    types = {name: [r["expectation_config"]["type"] for r in suite["results"]]
             for name, suite in result["suites"].items()}
    assert {"expect_column_values_to_be_unique", "expect_column_values_to_be_between",
            "expect_column_values_to_be_null"} <= set(types["conversations"])
    assert {"expect_column_values_to_be_in_set", "expect_column_value_lengths_to_be_between",
            "expect_column_values_to_match_regex",
            "expect_column_values_to_not_match_regex"} <= set(types["turns"])
    assert report.gx_expectations == sum(len(t) for t in types.values())
    unique = next(r for r in result["suites"]["conversations"]["results"]
                  if r["expectation_config"]["type"] == "expect_column_values_to_be_unique")
    assert {row["line"] for row in unique["result"]["unexpected_index_list"]} == {1, 6}
    docs = tmp / "report" / "data_docs"
    assert (docs / "index.html").is_file()
    assert list((docs / "validations").rglob("*.html"))


def test_pii_quarantine_action(tmp_path: Path, fixtures_dir: Path) -> None:
    report, valid, quarantine = _validate(tmp_path, fixtures_dir / "bad_conversations.jsonl",
                                          pii_action="quarantine", max_bad_share=1.0)
    lines = {q["line"]: [r["check"] for r in q["reasons"]] for q in _lines(quarantine)}
    for line, check in PII_LINES.items():
        assert lines[line] == [check]
    assert report.valid == 3 and report.metrics()["pii"]["turns"] == 2


def _conversation(cid: str, *turns: tuple[str, str]) -> Conversation:
    return Conversation(conversation_id=cid, source="t", domain="d",
                        turns=[Turn(role=role, content=text) for role, text in turns])


def test_bounds_from_params_quarantine_long_turns_and_long_talks(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, [
        _conversation("ok", ("user", "short"), ("assistant", "fine")),
        _conversation("long-turn", ("user", "x" * 50), ("assistant", "fine")),
        _conversation("many-turns", *[("user" if i % 2 == 0 else "assistant", f"t{i}") for i in range(7)]),
    ])
    section = {"max_chars": 20, "max_turns": 6, "max_bad_share": 1.0, "input": "ignored"}
    config = ValidationConfig.from_params(section)
    report = validate_file(source, tmp_path / "v.jsonl", tmp_path / "q.jsonl", config=config)
    reasons = {q["conversation_id"]: q["reasons"][0] for q in _lines(tmp_path / "q.jsonl")}
    assert reasons["long-turn"]["check"] == "turn_length" and "(50 chars)" in reasons["long-turn"]["reason"]
    assert reasons["many-turns"]["check"] == "turn_count" and "(7 turns)" in reasons["many-turns"]["reason"]
    assert report.valid == 1


def test_bad_share_at_threshold_passes(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    good = [_conversation(f"c{i}", ("user", f"hi {i}"), ("assistant", "hello")) for i in range(3)]
    write_jsonl(source, good)
    with source.open("a") as handle:
        handle.write("not json\n")
    report = validate_file(source, tmp_path / "v.jsonl", tmp_path / "q.jsonl",
                           config=ValidationConfig(max_bad_share=0.25))
    assert (report.valid, report.quarantined, report.bad_share) == (3, 1, 0.25)
    with pytest.raises(TooManyBadRecords):
        validate_file(source, tmp_path / "v.jsonl", tmp_path / "q.jsonl",
                      config=ValidationConfig(max_bad_share=0.2))


def test_empty_input_is_an_error_but_both_files_exist(tmp_path: Path) -> None:
    source = tmp_path / "empty.jsonl"
    source.write_text("\n\n")
    with pytest.raises(DataError, match="no records"):
        validate_file(source, tmp_path / "v.jsonl", tmp_path / "q.jsonl")
    assert (tmp_path / "v.jsonl").read_text() == "" and (tmp_path / "q.jsonl").read_text() == ""


def test_missing_input_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nope.jsonl: file not found"):
        validate_file(tmp_path / "nope.jsonl", tmp_path / "v.jsonl", tmp_path / "q.jsonl")


def test_unknown_pii_action_is_refused() -> None:
    with pytest.raises(ValueError, match="pii_action"):
        ValidationConfig.from_params({"pii_action": "delete"})


def test_role_flipped_views_are_not_duplicates_but_repeats_are() -> None:
    builder = TableBuilder()
    a = _conversation("x-a", ("user", "hi"), ("assistant", "yo"))
    b = _conversation("x-b", ("assistant", "hi"), ("user", "yo"))
    builder.add(1, a)
    builder.add(2, b)
    builder.add(3, a.model_copy(update={"conversation_id": "x-a-again"}))
    conversations = builder.frames()["conversations"]
    assert conversations["duplicate_of_line"].isna().tolist() == [True, True, False]
    assert int(conversations["duplicate_of_line"].iloc[2]) == 1


def test_suite_catches_what_the_schema_would_also_reject() -> None:
    """The GX suite is the contract on its own: rows that skipped pydantic still fail it."""
    builder = TableBuilder()
    bad_turns = [Turn.model_construct(role="system", content="  ", patterns=[], meta={}),
                 Turn.model_construct(role="user", content="ok", patterns=["refusal", "sarcasm"], meta={}),
                 Turn.model_construct(role="assistant", content="fine", patterns=["refusal"], meta={})]
    raw = Conversation.model_construct(conversation_id="raw", source="t", domain="d", turns=bad_turns)
    builder.add(7, raw)
    outcome = run_suites(builder.frames(), Bounds(min_chars=1, max_chars=100))
    found = {(f.check, f.field) for f in outcome.findings}
    assert found == {("role_in_set", "turns[0].role"), ("content_not_empty", "turns[0].content"),
                     ("known_patterns", "turns[1].patterns"), ("patterns_on_user_turns", "turns[2].patterns")}
    assert all(f.line == 7 and f.conversation_id == "raw" for f in outcome.findings)
    assert not outcome.success
    unknown = next(f for f in outcome.findings if f.check == "known_patterns")
    assert "sarcasm" in unknown.reason and "refusal" not in unknown.reason


def test_every_expectation_says_what_it_guards() -> None:
    suites = build_suites(Bounds(), pii_action="quarantine")
    for suite in suites.values():
        for expectation in suite.expectations:
            assert {"check", "field", "reason", "action"} <= set(expectation.meta)
    actions = {e.meta["check"]: e.meta["action"] for e in suites[TURNS].expectations}
    assert actions["pii_email"] == actions["pii_phone"] == "quarantine"


@pytest.mark.parametrize(("text", "email", "phone"), [
    ("write to jane.doe@example.org today", True, False),
    ("call (555) 123-4567.", False, True),
    ("call 555-123-4567 or +44 207 123 4567", False, True),
    ("+4915112345678", False, True),
    ("born in 1999, moved in 2019-2020, paid 1234", False, False),
    ("order 1555-123-45678", False, False),
    ("me @ home, 5 am", False, False),
])
def test_pii_patterns(text: str, email: bool, phone: bool) -> None:
    import pandas as pd

    series = pd.Series([text])
    assert bool(series.str.contains(EMAIL_REGEX).iloc[0]) is email
    assert bool(series.str.contains(PHONE_REGEX).iloc[0]) is phone
