"""The FastAPI app over any batched user side (`UserSimulator` in practice): `create_app` wires the
shared state, the guard, the error shape and the routes; `load_app` loads the simulator first.

    POST   /v1/chat/completions        OpenAI-compatible and stateless: the caller is the agent, the
                                       answer is the simulated user's next message (serve.openai_routes)
    GET    /v1/models[/{id}]           the served simulator (its registry URI / folder / `assistant`)
    POST   /v1/sessions                {domain, goal, persona?, seed?} -> the user's opening
    POST   /v1/sessions/{id}/messages  {message}                       -> the user's reply
    GET    /v1/sessions/{id}           the transcript (private slot values and reasoning hidden)
    DELETE /v1/sessions/{id}                                              (serve.session_routes)
    GET    /healthz, /metrics (Prometheus), /v1/info                      (here: the operations routes)

Every error is JSON with FastAPI's `detail` and OpenAI's `error` {message, type, param, code}
(serve.errors): 401 no/bad key, 404 unknown/expired/foreign session or unknown model, 409 a message to
an ended session (or while the previous one is being answered), 413 body too large, 422 a bad field
(named), 429 rate limit or too many open sessions for the key, 504 the simulator took too long, 500 the
simulator failed (the session then ends). The server itself stays up.

Every handler is `async`, so the session store is only touched from the event loop; only the
simulator's generation runs in a thread (see `MicroBatcher`).

Failure isolation: text is checked at the edge (serve.chat: lone surrogates are a 422 naming the
field anywhere, NUL/control characters too outside dialogue messages, where they are replaced by
U+FFFD and counted), and a request that fails inside a shared batch fails
alone: the batcher retries the rest without it (see `MicroBatcher`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, is_dataclass
from typing import Any

from fastapi import FastAPI, Response

from mimesis_rl.envs.protocols import UserSide
from mimesis_rl.serve.batcher import MicroBatcher
from mimesis_rl.serve.chat import known_domains
from mimesis_rl.serve.context import ServeContext
from mimesis_rl.serve.errors import add_error_handlers
from mimesis_rl.serve.guard import Guard, RateLimiter
from mimesis_rl.serve.metrics import CONTENT_TYPE, ServeMetrics
from mimesis_rl.serve.openai_routes import add_openai_routes
from mimesis_rl.serve.session_routes import add_session_routes
from mimesis_rl.serve.settings import ServeSettings
from mimesis_rl.serve.store import SessionStore


def create_app(user: UserSide, settings: ServeSettings | None = None,
               clock: Callable[[], float] = time.monotonic,
               environ: Mapping[str, str] | None = None) -> FastAPI:
    """An app serving `user`. `clock` drives session expiry and rate limits (injectable for tests);
    `environ` is where MIMESIS_API_KEYS is read (default: the process environment).

    With `settings.auth` (the default) at least one key must be configured; turning auth off is the
    caller's decision (the CLI allows it on loopback hosts only).
    """
    settings = settings or ServeSettings()
    keys = settings.required_keys(environ)
    store = SessionStore(settings.max_sessions, settings.session_ttl_s, clock)
    metrics = ServeMetrics(lambda: len(store))
    batcher = MicroBatcher(user, settings.batch_window_ms / 1000, settings.max_batch,
                           on_batch=lambda kind, n: metrics.batch_size.labels(kind).observe(n))
    ctx = ServeContext(user, settings, store, batcher, metrics, known_domains(settings.domains), keys)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    app = FastAPI(title="MIMESIS user simulator", version="2", lifespan=lifespan,
                  description="A trained user simulator behind HTTP: an OpenAI-compatible chat endpoint "
                              "where the caller is the agent, and a sessions API.")
    app.state.store, app.state.batcher, app.state.settings = store, batcher, settings
    app.state.metrics = metrics
    app.add_middleware(Guard, keys=keys, limiter=RateLimiter(settings.rate_per_s, settings.rate_burst, clock),
                       max_body_bytes=settings.max_body_bytes, metrics=metrics)
    add_error_handlers(app, metrics)
    add_operations_routes(app, ctx)
    add_openai_routes(app, ctx)
    add_session_routes(app, ctx)
    return app


def add_operations_routes(app: FastAPI, ctx: ServeContext) -> None:
    """`/healthz`, `/metrics` (Prometheus) and `/v1/info` (what is served, and how)."""
    user, settings, store, batcher = ctx.user, ctx.settings, ctx.store, ctx.batcher

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "sessions": len(store), "batches": batcher.batches,
                "batched_requests": batcher.requests}

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(ctx.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/info")
    async def info() -> dict[str, Any]:
        from mimesis_rl.simulator.format import format_spec

        style = getattr(user, "card_style", None)
        return {
            "model": settings.model,
            "name": user.name,
            "card_style": style,
            "turn_format": format_spec() if style == "simulator" else None,
            "sampling": _plain(getattr(user, "sampling", None)),
            "expose_reasoning": ctx.expose,
            "expose_private": settings.expose_private,
            "raw": settings.raw,
            "auth": bool(ctx.keys),
            "domains": ctx.domains,
            "batching": {"window_ms": settings.batch_window_ms, "max_batch": settings.max_batch},
            "sessions": {"max": settings.max_sessions, "ttl_s": settings.session_ttl_s,
                         "max_per_key": settings.max_sessions_per_key, "open": len(store)},
            "limits": {"rate_per_s": settings.rate_per_s, "rate_burst": settings.rate_burst,
                       "max_body_bytes": settings.max_body_bytes,
                       "max_message_chars": settings.max_message_chars, "max_messages": settings.max_messages,
                       "request_timeout_s": settings.request_timeout_s},
        }


def load_app(settings: ServeSettings, device: Any = "auto", environ: Mapping[str, str] | None = None,
             **load_kwargs: Any) -> FastAPI:
    """The app for `settings.model` (a folder, an MLflow URI or `assistant`), batched `max_batch` wide.

    device: as `UserSimulator.load` takes it; the CLI passes params.yaml's `models:` switch.
    Keys are checked before the model is loaded, so a misconfigured server fails at once.
    """
    from mimesis_rl.simulator.runtime import UserSimulator

    settings.required_keys(environ)
    simulator = UserSimulator.load(settings.model, base_model=settings.base_model, device=device,
                                   batch_size=settings.max_batch, **load_kwargs)
    return create_app(simulator, settings, environ=environ)


def _plain(value: Any) -> Any:
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value
