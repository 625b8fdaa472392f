"""`mimesis lineage URI`: the chain behind a registry version (simulator, data, code, gate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the `lineage` command to the top-level app."""

    @app.command()
    def lineage(
        uri: Annotated[str, typer.Argument(help="models:/<name>@<alias> or models:/<name>/<version>")],
        as_json: Annotated[bool, typer.Option("--json", help="print the chain as JSON")] = False,
        root: Annotated[Path | None, typer.Option(help="checkout whose dvc.lock the md5s are checked "
                                                       "against (default: the current project)")] = None,
    ) -> None:
        """Print agent version <- simulator version <- data md5s <- commit/params of each stage run, and
        the gate decision recorded on each version."""
        import mlflow

        from mimesis_rl.config import project_root, tracking_uri
        from mimesis_rl.tracking.chain import format_text
        from mimesis_rl.tracking.chain import lineage as query

        checkout = root or project_root()
        store = tracking_uri(checkout)
        if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).exists():
            typer.secho(f"no MLflow store at {store} (run the pipeline first, or set MLFLOW_TRACKING_URI)",
                        fg="red", err=True)
            raise typer.Exit(2)
        from mimesis_rl.tracking.runs import sweep_once

        sweep_once(root=checkout)  # runs whose process was killed are reaped by any command opening the store
        client = mlflow.MlflowClient(store)
        try:
            result = query(uri, root=checkout, client=client)
        except (ValueError, LookupError) as exc:
            typer.secho(str(exc), fg="red", err=True)
            raise typer.Exit(2) from exc
        result["tracking_uri"] = store
        typer.echo(json.dumps(result, indent=2, default=str) if as_json else format_text(result))
