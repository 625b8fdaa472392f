"""`mimesis data …`: ingest a corpus through an adapter, validate a JSONL file."""

from __future__ import annotations

import typer

from mimesis_rl.cli._checks import TOO_MANY_BAD, fail, io_errors, share_option

app = typer.Typer(help="Ingest and validate conversation data.", no_args_is_help=True)


@app.command("ingest")
def ingest_command(
    adapter: str = typer.Option(..., help="corpus format: chitchat | casino | messages"),
    input: str = typer.Option(..., "--input", help="a file, a folder of files, or `embedded`"),
    output: str = typer.Option(..., help="conversations JSONL to write"),
    rejects: str = typer.Option(None, help="rejected records JSONL [default: <output>.rejects.jsonl]"),
    domain: str = typer.Option(None, help="messages adapter: domain for lines without one"),
    source: str = typer.Option(None, help="messages adapter: source name for lines without one"),
    max_bad_share: float = share_option(0.05, "exit 1 past this share (0-1) of bad source records"),
) -> None:
    """Map a corpus onto the conversation schema; every record it cannot map goes to the rejects file.

    Exit 0 on success, 1 when the bad share passes --max-bad-share (both files are still written),
    2 for an unknown adapter, an unreadable input, an unwritable output, or two roles on one file.
    """
    from pathlib import Path

    from mimesis_rl.data.ingest import SourceSpec, ingest
    from mimesis_rl.data.jsonl import DataError

    options = {key: value for key, value in (("domain", domain), ("source", source)) if value is not None}
    rejects = rejects or str(Path(output).with_suffix("")) + ".rejects.jsonl"
    try:
        with io_errors():
            report = ingest([SourceSpec(adapter, input, options)], output, rejects)
    except DataError as exc:
        raise fail(f"error: {exc}") from None
    typer.echo(f"wrote {report.conversations} conversations ({report.source_records} dialogues) to {output}")
    typer.echo(f"rejects: {len(report.bad)} bad, {len(report.excluded)} excluded -> {rejects}")
    for record in [r for _, r in report.bad[:10]]:
        typer.echo(f"  bad: {record}", err=True)
    try:
        report.check(max_bad_share)
    except DataError as exc:
        raise fail(f"error: {exc}", TOO_MANY_BAD) from None


@app.command("validate")
def validate_command(
    input: str = typer.Option(..., "--input", help="conversations JSONL to validate"),
    output: str = typer.Option(..., help="valid records JSONL to write"),
    quarantine: str = typer.Option(..., help="quarantined records JSONL to write (reasons + raw line)"),
    report_dir: str = typer.Option(None, help="folder for the GX validation result JSON and Data Docs"),
    max_bad_share: float = share_option(0.05, "exit 1 when more than this share (0-1) of records is bad"),
    pii_action: str = typer.Option("redact", help="e-mail, phone, SSN, card numbers: redact (typed "
                                   "placeholders like [EMAIL]), flag (keep, list) or quarantine"),
) -> None:
    """Check a conversations JSONL against the schema and the Great Expectations suite.

    Always writes both files (valid + quarantined = input records) and prints each bad line with
    its reason. Valid records are copied byte for byte, except that personal data is redacted by
    default (--pii-action flag keeps it); turns with NUL, control or bidi-override characters are
    kept and listed as flagged. Exit 0 on
    success, 1 past --max-bad-share, 2 for an unreadable or empty input, an unwritable output, or
    two roles on one file.
    """
    from mimesis_rl.data.expectations import PII_ACTIONS
    from mimesis_rl.data.jsonl import DataError
    from mimesis_rl.data.validation import TooManyBadRecords, ValidationSettings, validate_file

    if pii_action not in PII_ACTIONS:
        raise fail(f"error: --pii-action must be one of {', '.join(PII_ACTIONS)}, got {pii_action!r}")
    config = ValidationSettings(max_bad_share=max_bad_share, pii_action=pii_action)  # type: ignore[arg-type]
    exit_code, error = 0, ""
    try:
        with io_errors():
            report = validate_file(input, output, quarantine, report_dir=report_dir, config=config)
    except TooManyBadRecords as exc:
        report, exit_code, error = exc.report, TOO_MANY_BAD, str(exc).splitlines()[0]
    except DataError as exc:
        raise fail(f"error: {exc}") from None
    for line in report.bad_lines():
        typer.echo(f"  bad: {line}", err=True)
    typer.echo(f"{report.records} records: {report.valid} valid -> {output}, "
               f"{report.quarantined} quarantined ({report.bad_share:.2%}) -> {quarantine}")
    pii = report.pii()
    if pii["turns"]:
        done = {"quarantine": "quarantined", "redact": "redacted"}.get(pii_action, "flagged")
        typer.echo(f"PII {done}: {pii['turns']} turns in {pii['conversations']} records"
                   + (f"; {pii['redacted_values']} values redacted: {pii['redacted']}"
                      if pii.get("redacted") else ""))
    for flagged in report.flagged_lines():
        typer.echo(f"  flagged (kept): {flagged}", err=True)
    if report_dir:
        typer.echo(f"report: {report_dir} (Data Docs: {report_dir}/data_docs/index.html)")
    if exit_code:
        raise fail(f"error: {error}", exit_code)
