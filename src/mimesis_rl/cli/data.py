"""`mimesis data …`: ingest a corpus through an adapter, validate a JSONL file."""

from __future__ import annotations

import typer

app = typer.Typer(help="Ingest and validate conversation data.", no_args_is_help=True)
