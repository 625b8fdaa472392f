"""Validate a conversations JSONL: schema first, then the Great Expectations suite.

Stage 1 reads every line through `iter_conversations`; lines that are not UTF-8, not JSON or
fail the pydantic schema are quarantined with file, line, field and reason. Stage 2 runs the GX
suites (`mimesis_rl.data.expectations`) over the parsed records; a conversation that fails any
quarantining expectation goes to quarantine whole, with every reason that hit it; duplicates are
judged last, among the records that passed, keeping the first. Nothing is dropped: valid +
quarantined = the input's records (blank lines are counted, not records), and nothing is altered:
a valid record is its input line byte for byte (only `pii_action: redact` rewrites a record).
Paths are checked before anything is read (`check_paths`). The threshold check comes last, after
both files and the report are written, so a failed run still leaves everything needed to see why.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.data.expectations import PII_ACTIONS, Bounds, Finding, PiiAction, TableBuilder, run_suites
from mimesis_rl.data.jsonl import (
    MAX_LINE_BYTES,
    BadRecord,
    DataError,
    LongLine,
    check_share,
    is_blank,
    iter_conversations,
    iter_raw_lines,
    loads_strict,
)
from mimesis_rl.data.pii import redact
from mimesis_rl.fsutil import (
    PathError,
    atomic_open,
    check_distinct,
    check_input_file,
    check_not_inside,
    check_output_dir,
    check_output_file,
    write_json,
)
from mimesis_rl.settings import from_section

log = logging.getLogger(__name__)

GX_RESULT_FILE = "gx_validation_result.json"
SUMMARY_FILE = "summary.json"
DATA_DOCS_DIR = "data_docs"
FIRST_BAD_SHOWN = 5
STAGE_FILES = ("input", "output", "quarantine", "report_dir")  # the stage's own keys (ValidateStageSettings)


@dataclass(frozen=True)
class ValidationSettings:
    """Knobs of the `validate` stage (params.yaml, section `validate`)."""

    max_bad_share: float = 0.05
    min_chars: int = 1
    max_chars: int = 4000
    min_turns: int = 2
    max_turns: int = 200
    pii_action: PiiAction = "redact"  # training data: personal data replaced by [EMAIL] etc.; `flag` keeps it
    max_line_bytes: int = MAX_LINE_BYTES  # a longer line is quarantined without being read whole

    @classmethod
    def from_params(cls, section: Mapping[str, Any] | None) -> ValidationSettings:
        """From params.yaml `validate:`; a key that is neither a knob nor one of the stage's files
        (`STAGE_FILES`) is refused, naming it."""
        return from_section(cls, section, "validate", skip=STAGE_FILES)

    def __post_init__(self) -> None:
        if self.pii_action not in PII_ACTIONS:
            raise ValueError(f"validate.pii_action must be one of {', '.join(PII_ACTIONS)}, "
                             f"got {self.pii_action!r}")
        check_share(self.max_bad_share, "validate.max_bad_share")

    @property
    def bounds(self) -> Bounds:
        return Bounds(self.min_chars, self.max_chars, self.min_turns, self.max_turns)


@dataclass(frozen=True)
class ValidateStageSettings:
    """The `validate` stage: its files and the checks' knobs (`checks`), from params.yaml `validate:`.

    input: the ingested conversations; output: the valid records; quarantine: every bad record with
    its reasons; report_dir: the GX result and Data Docs (null: none).
    """

    input: str
    output: str
    quarantine: str
    report_dir: str | None
    checks: ValidationSettings

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> ValidateStageSettings:
        section = dict(section or {})
        checks = ValidationSettings.from_params(section)  # refuses unknown keys, knobs and files alike
        files = {k: v for k, v in section.items() if k in STAGE_FILES}
        return from_section(cls, files, "validate", checks=checks)


@dataclass(frozen=True)
class Reason:
    check: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


@dataclass
class ValidationReport:
    """What a validation found; `metrics()` is what the stage records."""

    input_path: str
    output_path: str
    quarantine_path: str
    report_dir: str | None
    max_line_bytes: int = MAX_LINE_BYTES
    records: int = 0
    blank_lines: int = 0
    valid: int = 0
    bad: dict[int, list[Reason]] = field(default_factory=dict)  # line -> reasons, in line order
    pii_hits: list[Finding] = field(default_factory=list)  # kept (flag), redacted, or also in `bad`
    flags: list[Finding] = field(default_factory=list)  # kept but listed (suspicious characters)
    redact: dict[int, set[int]] = field(default_factory=dict)  # line -> turns to redact (pii_action redact)
    redacted: Counter[str] = field(default_factory=Counter)  # placeholders written, per PII kind
    gx_success: bool = True
    gx_expectations: int = 0
    gx_failed_expectations: int = 0
    seconds: float = 0.0

    @property
    def quarantined(self) -> int:
        return len(self.bad)

    @property
    def bad_share(self) -> float:
        return self.quarantined / self.records if self.records else 0.0

    def bad_lines(self) -> list[str]:
        """`file:line: field: reason` for every quarantined record, in line order."""
        return [f"{self.input_path}:{line}: " + "; ".join(str(r) for r in reasons)
                for line, reasons in sorted(self.bad.items())]

    def reasons_histogram(self) -> dict[str, int]:
        """Quarantined records per check (a record counts once per check that hit it)."""
        counts: Counter[str] = Counter()
        for reasons in self.bad.values():
            counts.update({r.check for r in reasons})
        return dict(sorted(counts.items()))

    def pii(self) -> dict[str, Any]:
        """Turns and records with personal data (per kind), whatever the action; with pii_action
        redact, also the placeholders written per kind and the records they went into."""
        kinds = Counter(f.check for f in self.pii_hits)
        turns = {(f.line, f.turn) for f in self.pii_hits}
        out: dict[str, Any] = {"turns": len(turns), "conversations": len({f.line for f in self.pii_hits}),
                               **{kind: n for kind, n in sorted(kinds.items())}}
        if self.redact:
            out["redacted_records"] = sum(line not in self.bad for line in self.redact)
            out["redacted"] = dict(sorted(self.redacted.items()))
            out["redacted_values"] = sum(self.redacted.values())
        return out

    def flagged(self) -> dict[str, int]:
        """Turns kept but flagged, per check (e.g. suspicious_chars: NUL, bidi overrides)."""
        return dict(sorted(Counter(f.check for f in self.flags if f.line not in self.bad).items()))

    def flagged_lines(self) -> list[str]:
        return [f"{self.input_path}:{f.line}: {f.field}: {f.reason}"
                for f in self.flags if f.line not in self.bad]

    def metrics(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "valid": self.valid,
            "quarantined": self.quarantined,
            "blank_lines": self.blank_lines,
            "bad_share": round(self.bad_share, 6),
            "reasons": self.reasons_histogram(),
            "pii": self.pii(),
            "flagged": self.flagged(),
            "gx": {"success": self.gx_success, "expectations": self.gx_expectations,
                   "failed_expectations": self.gx_failed_expectations},
            "seconds": round(self.seconds, 3),
        }


class TooManyBadRecords(DataError):
    """The bad share passed the threshold; the outputs are written, `report` says what was found."""

    def __init__(self, report: ValidationReport, max_bad_share: float) -> None:
        self.report = report
        first = "\n".join(f"  {line}" for line in report.bad_lines()[:FIRST_BAD_SHOWN])
        more = report.quarantined - min(report.quarantined, FIRST_BAD_SHOWN)
        super().__init__(
            f"{report.input_path}: {report.quarantined} of {report.records} records are bad "
            f"({report.bad_share:.2%} > max_bad_share {max_bad_share:.2%}); "
            f"quarantine: {report.quarantine_path}\nfirst bad records:\n{first}"
            + (f"\n  ... and {more} more" if more else ""))


def _bucket(bad: BadRecord) -> str:
    if not bad.field:
        return "json" if bad.reason.startswith(("malformed JSON", "expected a JSON object")) else "schema"
    return "schema." + re.sub(r"\[\d+\]", "", bad.field)


def validate_file(input_path: str | Path, output_path: str | Path, quarantine_path: str | Path,
                  report_dir: str | Path | None = None, config: ValidationSettings | None = None,
                  ) -> ValidationReport:
    """Validate, write valid + quarantine JSONL (and the GX report), then apply the threshold.

    Raises TooManyBadRecords after writing everything when the bad share passes
    `config.max_bad_share`, and DataError when the input is missing or holds no record.
    """
    config = config or ValidationSettings()
    check_paths(input_path, output_path, quarantine_path, report_dir)
    started = time.perf_counter()
    report = ValidationReport(str(input_path), str(output_path), str(quarantine_path),
                              str(report_dir) if report_dir is not None else None, config.max_line_bytes)

    tables = TableBuilder()
    for line, item in iter_conversations(input_path, config.max_line_bytes):
        report.records += 1
        if isinstance(item, BadRecord):
            report.bad[line] = [Reason(_bucket(item), item.field, item.reason)]
        else:
            tables.add(line, item)

    docs_dir = Path(report_dir) / DATA_DOCS_DIR if report_dir is not None else None
    outcome = run_suites(tables.frames(), config.bounds, config.pii_action, docs_dir=docs_dir)
    for finding in outcome.findings:
        if finding.is_pii:
            report.pii_hits.append(finding)
            if finding.action == "redact" and finding.turn is not None:
                report.redact.setdefault(finding.line, set()).add(finding.turn)
        elif finding.action == "flag":
            report.flags.append(finding)
        if finding.action == "quarantine":
            reason = Reason(finding.check, finding.field, finding.reason)
            report.bad.setdefault(finding.line, []).append(reason)
    report.bad = dict(sorted(report.bad.items()))
    report.gx_success = outcome.success
    all_results = [r for suite in outcome.results.values() for r in suite["results"]]
    report.gx_expectations = len(all_results)
    report.gx_failed_expectations = sum(not r["success"] for r in all_results)

    _write_outputs(report)
    report.seconds = time.perf_counter() - started
    if report_dir is not None:
        write_json(Path(report_dir) / GX_RESULT_FILE,
                   {"success": outcome.success, "suites": outcome.results})
        write_json(Path(report_dir) / SUMMARY_FILE, {
            **report.metrics(),
            "bad_records": report.bad_lines(),
            "flagged_turns": report.flagged_lines(),
            "pii_turns": [{"line": f.line, "conversation_id": f.conversation_id, "field": f.field,
                           "check": f.check, "action": f.action} for f in report.pii_hits],
        })
    log.info("validated %s: %d records, %d valid, %d quarantined (%.2f%%), %d PII turns (%s), %.1fs",
             input_path, report.records, report.valid, report.quarantined, 100 * report.bad_share,
             len(report.pii_hits), config.pii_action, report.seconds)

    if report.records == 0:
        raise DataError(f"{input_path}: no records to validate")
    if report.bad_share > config.max_bad_share:
        raise TooManyBadRecords(report, config.max_bad_share)
    return report


def check_paths(input_path: str | Path, output_path: str | Path, quarantine_path: str | Path,
                report_dir: str | Path | None = None) -> None:
    """Refuse, before reading anything, paths that would lose data or fail half-way: a missing or
    unreadable input, an output that cannot be written, two roles on one file, or a file where
    the report folder writes (its Data Docs folder is replaced whole)."""
    try:
        check_input_file(input_path, "input")
        check_output_file(output_path, "output")
        check_output_file(quarantine_path, "quarantine")
        roles: dict[str, str | Path | None] = {
            "input": input_path, "output": output_path, "quarantine": quarantine_path}
        if report_dir is not None:
            check_output_dir(report_dir, "report folder")
            check_not_inside(roles, Path(report_dir) / DATA_DOCS_DIR, "the Data Docs folder",
                             "which is replaced on every run")
            roles |= {"the GX result file": Path(report_dir) / GX_RESULT_FILE,
                      "the summary file": Path(report_dir) / SUMMARY_FILE}
        check_distinct(roles)
    except PathError as exc:
        raise DataError(str(exc)) from None


def _write_outputs(report: ValidationReport) -> None:
    """Second pass over the input: each record's own line goes to exactly one of the two files.

    Valid lines are copied as bytes, unchanged (a UTF-8 BOM opening the file is not copied).
    """
    with atomic_open(report.output_path, "wb") as valid, atomic_open(report.quarantine_path) as quarantine:
        for line, data in iter_raw_lines(report.input_path, report.max_line_bytes):
            if is_blank(data):
                report.blank_lines += 1
                continue
            reasons = report.bad.get(line)
            if reasons is None:
                if line in report.redact:
                    data = _redacted(data, report.redact[line], report.redacted)
                valid.write(data + b"\n")
                report.valid += 1
                continue
            raw = data.decode("utf-8", errors="backslashreplace")
            record = {
                "source_file": report.input_path,
                "line": line,
                "conversation_id": _conversation_id(raw),
                "field": reasons[0].field,
                "reason": "; ".join(str(r) for r in reasons),
                "reasons": [{"check": r.check, "field": r.field, "reason": r.reason} for r in reasons],
                "raw": raw,
            }
            if raw.encode("utf-8", errors="surrogateescape") != data:  # not UTF-8: keep the bytes too
                record["raw_base64"] = base64.b64encode(data).decode("ascii")
            if isinstance(data, LongLine):  # only its head was read: say so, with the whole size
                record["raw_truncated"], record["line_bytes"] = True, data.size
            quarantine.write(json.dumps(record, ensure_ascii=False) + "\n")
    if report.valid + report.quarantined != report.records:  # the two passes must agree
        raise DataError(f"{report.input_path}: changed while being validated ({report.valid} valid + "
                        f"{report.quarantined} quarantined != {report.records} records)")


def _redacted(data: bytes, turns: set[int], counts: Counter[str]) -> bytes:
    """The record with personal data in the named turns' content replaced by typed placeholders;
    the only change validate ever makes to a record, and only with pii_action redact."""
    record = json.loads(data)
    for index in sorted(turns):
        turn = record["turns"][index]
        turn["content"], found = redact(turn["content"])
        counts.update(found)
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


def _conversation_id(raw: str) -> str | None:
    try:
        obj = loads_strict(raw)
    except ValueError:  # malformed, a huge number, too deep: the record has no usable id
        return None
    value = obj.get("conversation_id") if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None
