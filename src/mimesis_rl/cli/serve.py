"""`mimesis serve`: the user simulator behind the HTTP API of `mimesis_rl.serve`.

    MIMESIS_API_KEYS=$(openssl rand -hex 24) mimesis serve --model assistant
    mimesis serve --no-auth                     # loopback only: refused with any other --host
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer


def _project_params() -> dict[str, Any]:
    from mimesis_rl.config import load_params
    from mimesis_rl.params.check import ParamsError

    try:
        return load_params()
    except FileNotFoundError:  # outside a checkout: the built-in defaults
        return {}
    except ParamsError as exc:  # a checkout whose params.yaml is malformed: say so, never ignore it
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None


def serve(
    model: Annotated[str | None, typer.Option(help="simulator folder, MLflow URI or `assistant` "
                                                     "(default: params.yaml serve.model)")] = None,
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port (1-65535)")] = 8000,
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
    no_auth: Annotated[bool, typer.Option(
        "--no-auth", help="serve without API keys; allowed only on a loopback host (127.0.0.1, ::1, "
                          "localhost)")] = False,
    keys_file: Annotated[str | None, typer.Option(help="file with one API key per line (also: the "
                                                       "MIMESIS_API_KEYS environment variable)")] = None,
    expose_private: Annotated[bool, typer.Option(
        "--expose-private", help="show the goal card's private slot values in transcripts")] = False,
    raw: Annotated[bool, typer.Option(
        "--raw", help="/v1/chat/completions as a plain generation engine (like vLLM): the messages are the "
                      "model's own prompt, the raw completion comes back (for `--user openai:…`)")] = False,
) -> None:
    """Serve a user simulator over HTTP: POST /v1/chat/completions (OpenAI-compatible, the caller is the
    agent) and /v1/sessions. API keys are required unless --no-auth on a loopback host."""
    import uvicorn

    from mimesis_rl.cli._store import sweep_if_store
    from mimesis_rl.models.config import PrecisionSettings
    from mimesis_rl.serve import ServeSettings, is_loopback, load_app

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if no_auth and not is_loopback(host):
        typer.secho(f"error: --no-auth is refused on host {host!r}: without keys the server may only listen "
                    "on a loopback address (127.0.0.1, ::1, localhost); set MIMESIS_API_KEYS instead",
                    fg="red", err=True)
        raise typer.Exit(2)
    params = _project_params()
    try:
        settings = ServeSettings.from_section(params.get("serve"), model=model, base_model=base_model,
                                              batch_window_ms=batch_window_ms, max_batch=max_batch,
                                              expose_reasoning=expose_reasoning or None,
                                              expose_private=expose_private or None,
                                              auth=False if no_auth else None, keys_file=keys_file,
                                              raw=raw or None)
        sweep_if_store(settings.model, settings.base_model)
        app = load_app(settings, device=PrecisionSettings.from_params(params))
    except (FileNotFoundError, ValueError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from exc
    hidden = [name for name, shown in (("reasoning", settings.expose_reasoning),
                                       ("private slots", settings.expose_private)) if not shown]
    auth = "required" if settings.auth else "OFF (loopback)"
    typer.echo(f"serving {settings.model} on http://{host}:{port} (API keys {auth}; hidden: "
               f"{', '.join(hidden) or 'nothing'})", err=True)
    # access_log off: the app writes its own (no message text). Keep-alive 75 s, not uvicorn's 5 s: RL
    # clients pool connections, and one reused just as the server drops it fails the request.
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False, timeout_keep_alive=75)


def register(app: typer.Typer) -> None:
    """Add `serve` to the main app as a plain command (it has no sub-commands)."""
    app.command("serve")(serve)
