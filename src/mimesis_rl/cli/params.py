"""`mimesis params check`: the typed, strict check of params.yaml (mimesis_rl.params), alone.
`mimesis params resolve`: the `params` stage (dvc.yaml): params.yaml, its profile resolved, for DVC."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mimesis_rl.cli._checks import fail

app = typer.Typer(help="params.yaml: check it before anything runs.", no_args_is_help=True)


@app.command()
def check(
    file: Annotated[Path | None, typer.Option(
        "--params", help="params file (default: the project's params.yaml)")] = None,
) -> None:
    """Check every section and every profile overlay; exit 2 listing each problem (file: key.path: what)."""
    from mimesis_rl.config import PARAMS_FILE, project_root
    from mimesis_rl.params.check import ParamsError, check_params

    path = file or project_root() / PARAMS_FILE
    try:
        raw = check_params(path)
    except (ParamsError, FileNotFoundError) as exc:
        raise fail(f"error: {exc}") from None
    profiles = ", ".join(sorted(raw.get("profiles") or {})) or "none"
    active = raw.get("profile", "demo")
    typer.echo(f"{path}: OK ({len(raw) - 1} top-level keys; profiles: {profiles}; active: {active})")


@app.command()
def resolve(
    file: Annotated[Path | None, typer.Option(
        "--params", help="params file (default: the project's params.yaml)")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="where to write (default: params.resolved.yaml beside it)")] = None,
) -> None:
    """Write params.yaml with its active profile laid over the sections: every stage's DVC params, so
    an edit reruns only the stages whose settings it changes (`config.RESOLVED_FILE`)."""
    from mimesis_rl.cli._checks import io_errors
    from mimesis_rl.config import PARAMS_FILE, RESOLVED_FILE, project_root, write_resolved
    from mimesis_rl.fsutil import check_output_file
    from mimesis_rl.params.check import ParamsError

    path = file or project_root() / PARAMS_FILE
    target = out or path.parent / RESOLVED_FILE
    with io_errors():
        check_output_file(target, "--out")  # before params.yaml is read
    try:
        written = write_resolved(path, target)
    except (ParamsError, FileNotFoundError, ValueError) as exc:
        raise fail(f"error: {exc}") from None
    typer.echo(f"{written}: from {path}")
