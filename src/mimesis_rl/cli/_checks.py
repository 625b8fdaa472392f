"""Path and IO checks shared by the commands: one red line and exit 2, never a traceback.

Exit codes across the CLI: 0 done; 1 the data was read but too much of it is bad (the outputs
are still written); 2 the command cannot start (a path that is missing, a folder, unreadable or
not writable, two roles on one file, an option out of range).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from mimesis_rl.fsutil import PathError, os_error_line

USAGE = 2
TOO_MANY_BAD = 1


def fail(message: str, code: int = USAGE) -> typer.Exit:
    """Print `message` in red on stderr; the caller raises the returned Exit."""
    typer.secho(message, fg="red", err=True)
    return typer.Exit(code)


@contextmanager
def io_errors(prefix: str = "error") -> Iterator[None]:
    """Turn a PathError or an OSError (permission, read-only folder, disk full) into one line, exit 2."""
    try:
        yield
    except PathError as exc:
        raise fail(f"{prefix}: {exc}") from None
    except OSError as exc:
        raise fail(f"{prefix}: {os_error_line(exc)}") from None


def share_option(default: float, help: str) -> typer.models.OptionInfo:  # noqa: A002 - typer's name
    """A --max-bad-share option; values outside [0, 1] are refused before the command runs."""
    return typer.Option(default, min=0.0, max=1.0, help=help)


def check_eval_data(data: str | Path, out: str | Path, max_bad_share: float) -> None:
    """`sim eval`'s input checks, all before any model is loaded: a readable --data file, a
    writable --out folder, and a bad-record share within --max-bad-share (exit 1 past it)."""
    from mimesis_rl.data.jsonl import BadRecord, DataError, iter_conversations
    from mimesis_rl.fsutil import check_input_file, check_output_dir

    with io_errors():
        check_input_file(data, "--data")
        check_output_dir(out, "--out")
    records, bad = 0, []
    try:
        for _, item in iter_conversations(data):
            records += 1
            if isinstance(item, BadRecord):
                bad.append(item)
    except DataError as exc:
        raise fail(f"error: {exc}") from None
    share = len(bad) / records if records else 0.0
    if records == 0:
        raise fail(f"error: {data}: no records to evaluate on")
    if share > max_bad_share:
        first = "\n".join(f"  {b}" for b in bad[:5])
        raise fail(f"error: {data}: {len(bad)} of {records} records are bad ({share:.1%} > max_bad_share "
                   f"{max_bad_share:.1%}); first ones:\n{first}", TOO_MANY_BAD)
