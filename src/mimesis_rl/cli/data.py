"""`mimesis data …`: ingest a corpus through an adapter, validate a JSONL file."""

from __future__ import annotations

import typer

app = typer.Typer(help="Ingest and validate conversation data.", no_args_is_help=True)


@app.command("ingest")
def ingest_command(
    adapter: str = typer.Option(..., help="corpus format: chitchat | casino | messages"),
    input: str = typer.Option(..., "--input", help="a file, a folder of files, or `embedded`"),
    output: str = typer.Option(..., help="conversations JSONL to write"),
    rejects: str = typer.Option(None, help="rejected records JSONL [default: <output>.rejects.jsonl]"),
    domain: str = typer.Option(None, help="messages adapter: domain for lines without one"),
    source: str = typer.Option(None, help="messages adapter: source name for lines without one"),
    max_bad_share: float = typer.Option(0.05, help="exit 1 when more source records than this are bad"),
) -> None:
    """Map a corpus onto the conversation schema; every record it cannot map goes to the rejects file.

    Exit 0 on success, 1 when the bad share passes --max-bad-share (both files are still written),
    2 for an unknown adapter or an unreadable input.
    """
    from pathlib import Path

    from mimesis_rl.data.ingest import SourceSpec, ingest
    from mimesis_rl.data.jsonl import DataError

    options = {key: value for key, value in (("domain", domain), ("source", source)) if value is not None}
    rejects = rejects or str(Path(output).with_suffix("")) + ".rejects.jsonl"
    try:
        report = ingest([SourceSpec(adapter, input, options)], output, rejects)
    except DataError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"wrote {report.conversations} conversations ({report.source_records} dialogues) to {output}")
    typer.echo(f"rejects: {len(report.bad)} bad, {len(report.excluded)} excluded -> {rejects}")
    for record in [r for _, r in report.bad[:10]]:
        typer.echo(f"  bad: {record}", err=True)
    try:
        report.check(max_bad_share)
    except DataError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from None
