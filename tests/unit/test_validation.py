"""The validate flow and its Great Expectations suite, on small fixtures and hand-built tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimesis_rl.data.expectations import (
    TURNS,
    Bounds,
    TableBuilder,
    build_suites,
    duplicates_table,
    run_suites,
)
from mimesis_rl.data.jsonl import DataError, write_jsonl
from mimesis_rl.data.schema import Conversation, Turn
from mimesis_rl.data.validation import (
    GX_RESULT_FILE,
    TooManyBadRecords,
    ValidationSettings,
    validate_file,
)

# Line of tests/fixtures/bad_conversations.jsonl -> the check that must quarantine it.
EXPECTED_BAD = {
    2: "json",
    3: "schema.turns.content",
    4: "schema.turns.role",
    6: "unique_conversation_id",  # reuses the id of line 1, which stays (the first valid one)
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
        report = validate_file(source, valid, quarantine, config=ValidationSettings(**config))
    except TooManyBadRecords as exc:
        report = exc.report
    return report, valid, quarantine


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path, Path, Path]:
    """One validation of the bad-records fixture with the report (Data Docs) written."""
    source = Path(__file__).resolve().parents[1] / "fixtures" / "bad_conversations.jsonl"
    tmp = tmp_path_factory.mktemp("validate")
    with pytest.raises(TooManyBadRecords) as info:
        validate_file(source, tmp / "valid.jsonl", tmp / "quarantine.jsonl", report_dir=tmp / "report",
                      config=ValidationSettings(pii_action="flag"))  # flag: records kept byte for byte
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
    assert "line 5, which is kept" in quarantined[10]["reason"]  # the first copy of the turns stays
    assert "already used on line 1, which is kept" in quarantined[6]["reason"]
    assert quarantined[6]["conversation_id"] == "good-1" and quarantined[6]["field"] == "conversation_id"
    assert quarantined[2]["conversation_id"] is None  # malformed JSON: no id to be had
    bad_lines = report.bad_lines()
    assert bad_lines[0].startswith(f"{source}:2: malformed JSON")
    assert any(line.startswith(f"{source}:6: conversation_id: ") for line in bad_lines)
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
    assert "9 of 15 records are bad" in message and "max_bad_share 5.00%" in message
    assert f"{source}:2: malformed JSON" in message
    assert (tmp / "valid.jsonl").exists() and (tmp / "quarantine.jsonl").exists()
    assert report.metrics()["reasons"]["json"] == 2


def test_gx_result_json_holds_every_expectation(fixture_run) -> None:
    report, _, tmp, _ = fixture_run
    result = json.loads((tmp / "report" / GX_RESULT_FILE).read_text())
    assert result["success"] is False
    types = {name: [r["expectation_config"]["type"] for r in suite["results"]]
             for name, suite in result["suites"].items()}
    assert {"expect_column_values_to_be_between"} <= set(types["conversations"])
    assert {"expect_column_values_to_be_in_set", "expect_column_values_to_be_between",
            "expect_column_values_to_match_regex", "expect_column_values_to_be_null"} <= set(types["turns"])
    assert set(types["duplicates"]) == {"expect_column_values_to_be_null"}
    assert report.gx_expectations == sum(len(t) for t in types.values())
    unique = next(r for r in result["suites"]["duplicates"]["results"]
                  if r["expectation_config"]["kwargs"]["column"] == "duplicate_id_of_line")
    assert {row["line"] for row in unique["result"]["unexpected_index_list"]} == {6}
    docs = tmp / "report" / "data_docs"
    assert (docs / "index.html").is_file()
    assert list((docs / "validations").rglob("*.html"))


def test_pii_quarantine_action(tmp_path: Path, fixtures_dir: Path) -> None:
    report, valid, quarantine = _validate(tmp_path, fixtures_dir / "bad_conversations.jsonl",
                                          pii_action="quarantine", max_bad_share=1.0)
    lines = {q["line"]: [r["check"] for r in q["reasons"]] for q in _lines(quarantine)}
    for line, check in PII_LINES.items():
        assert lines[line] == [check]
    assert report.valid == 4 and report.metrics()["pii"]["turns"] == 2


def test_pii_redact_action_keeps_records_with_typed_placeholders(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, [
        _conversation("p1", ("user", "mail jane.doe@example.org or call +44 20 7946 0958"),
                      ("assistant", "ok")),
        _conversation("p2", ("user", "ssn 123-45-6789, card 4111 1111 1111 1111"), ("assistant", "noted")),
        _conversation("clean", ("user", "no personal data here"), ("assistant", "good")),
    ])
    before = source.read_text().splitlines()
    report = validate_file(source, tmp_path / "v.jsonl", tmp_path / "q.jsonl", report_dir=tmp_path / "r",
                           config=ValidationSettings(pii_action="redact"))
    valid = (tmp_path / "v.jsonl").read_text().splitlines()
    assert report.valid == 3 and report.quarantined == 0
    assert json.loads(valid[0])["turns"][0]["content"] == "mail [EMAIL] or call [PHONE]"
    assert json.loads(valid[1])["turns"][0]["content"] == "ssn [SSN], card [CARD]"
    assert valid[2] == before[2]  # untouched records pass byte for byte
    pii = report.metrics()["pii"]
    assert pii["redacted"] == {"card": 1, "email": 1, "phone": 1, "ssn": 1} and pii["redacted_records"] == 2
    assert pii["turns"] == 2 and pii["pii_card"] == 1
    # No value reaches the GX result, the summary or the Data Docs. Whole values, not 4-digit fragments:
    # Data Docs carry random run ids and timestamps that can contain any short digit run.
    written = [(tmp_path / "r" / GX_RESULT_FILE).read_text(), (tmp_path / "r" / "summary.json").read_text(),
               *(p.read_text() for p in (tmp_path / "r" / "data_docs").rglob("*.html"))]
    for secret in ("jane.doe@example.org", "7946 0958", "123-45-6789", "4111 1111 1111"):
        assert not any(secret in text for text in written), secret


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
    config = ValidationSettings.from_params(section)
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
                           config=ValidationSettings(max_bad_share=0.25))
    assert (report.valid, report.quarantined, report.bad_share) == (3, 1, 0.25)
    with pytest.raises(TooManyBadRecords):
        validate_file(source, tmp_path / "v.jsonl", tmp_path / "q.jsonl",
                      config=ValidationSettings(max_bad_share=0.2))


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
        ValidationSettings.from_params({"pii_action": "delete"})


def test_unknown_keys_are_refused_not_dropped() -> None:
    """A typo used to be dropped silently (the knob kept its default)."""
    typo = r"params.yaml: validate.max_chrs: unknown key \(did you mean `max_chars`\?\)"
    with pytest.raises(ValueError, match=typo):
        ValidationSettings.from_params({"max_chrs": 20, "input": "in.jsonl"})


def test_role_flipped_views_are_not_duplicates_but_repeats_are() -> None:
    builder = TableBuilder()
    a = _conversation("x-a", ("user", "hi"), ("assistant", "yo"))
    b = _conversation("x-b", ("assistant", "hi"), ("user", "yo"))
    builder.add(1, a)
    builder.add(2, b)
    builder.add(3, a.model_copy(update={"conversation_id": "x-a-again"}))
    builder.add(4, b)
    table = duplicates_table(builder.frames()["conversations"])
    assert table["duplicate_of_line"].isna().tolist() == [True, True, False, False]
    assert table["duplicate_of_line"].iloc[2:].tolist() == [1, 2]
    assert table["duplicate_id_of_line"].isna().tolist() == [True, True, True, False]
    # With line 1 quarantined for another reason, its copy on line 3 is the one that stays.
    table = duplicates_table(builder.frames()["conversations"], {1})
    assert table["line"].tolist() == [2, 3, 4]
    assert table["duplicate_of_line"].isna().tolist() == [True, True, False]


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


@pytest.mark.parametrize(("text", "kinds"), [
    ("write to jane.doe@example.org today", ["email"]),
    ("call (555) 123-4567.", ["phone"]),
    ("call 555-123-4567 or +44 207 123 4567", ["phone", "phone"]),
    ("+4915112345678", ["phone"]),
    ("ring +44 20 7946 0958 after six", ["phone"]),
    ("my number is 0123456789", ["phone"]),
    ("ssn 123-45-6789, card 4111 1111 1111 1111", ["ssn", "card"]),
    ("card 4111-1111-1111-1111 or 4111111111111111", ["card", "card"]),
    ("ticket 4111111111111112 (fails Luhn)", []),
    ("born in 1999, moved in 2019-2020, paid 1234", []),
    ("order 1555-123-45678, 12345678901 items, 12,345,678.90 dollars", []),
    ("me @ home, 5 am, ts 1700000000.5", []),
])
def test_pii_patterns(text: str, kinds: list[str]) -> None:
    from mimesis_rl.data.pii import find_pii, redact

    assert [kind for kind, _, _ in find_pii(text)] == kinds
    redacted, counts = redact(text)
    assert sum(counts.values()) == len(kinds) and not find_pii(redacted)
    for kind in kinds:
        assert f"[{kind.upper()}]" in redacted
