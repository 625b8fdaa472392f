"""`mimesis serve`: the user simulator behind the HTTP API of `mimesis_rl.serve`."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer


def _project_params() -> dict[str, Any]:
    from mimesis_rl.config import load_params

    try:
        return load_params()
    except (FileNotFoundError, ValueError):
        return {}


def serve(
    model: Annotated[str | None, typer.Option(help="simulator folder, MLflow URI or `assistant` "
                                                     "(default: params.yaml serve.model)")] = None,
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    expose_reasoning: Annotated[bool, typer.Option(
        "--expose-reasoning", help="include the user's private reasoning in replies (analysis only: "
                                   "an agent must never see it)")] = False,
    batch_window_ms: Annotated[float | None, typer.Option(
        help="wait this long after a request for others to share its batched generate "
             "(default: params.yaml serve.batch_window_ms)")] = None,
    max_batch: Annotated[int | None, typer.Option(help="send a batch at once at this size "
                                                       "(default: params.yaml serve.max_batch)")] = None,
    base_model: Annotated[str | None, typer.Option(help="base for `assistant` and unbundled adapters "
                                                        "(default: params.yaml serve.base_model)")] = None,
) -> None:
    """Serve a user simulator over HTTP (POST /v1/sessions, then /v1/sessions/{id}/messages)."""
    import uvicorn

    from mimesis_rl.models.config import PrecisionConfig
    from mimesis_rl.serve import ServeSettings, load_app

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    params = _project_params()
    try:
        settings = ServeSettings.from_section(params.get("serve"), model=model, base_model=base_model,
                                              batch_window_ms=batch_window_ms, max_batch=max_batch,
                                              expose_reasoning=expose_reasoning or None)
        app = load_app(settings, device=PrecisionConfig.from_params(params))
    except (FileNotFoundError, ValueError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"serving {settings.model} on http://{host}:{port} (reasoning "
               f"{'exposed' if settings.expose_reasoning else 'hidden'})", err=True)
    uvicorn.run(app, host=host, port=port)


def register(app: typer.Typer) -> None:
    """Add `serve` to the main app as a plain command (it has no sub-commands)."""
    app.command("serve")(serve)
