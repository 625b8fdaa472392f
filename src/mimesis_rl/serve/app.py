"""The FastAPI app over any batched user side (`UserSimulator` in practice).

    POST   /v1/sessions                {domain, goal, persona?, seed?} -> the user's opening
    POST   /v1/sessions/{id}/messages  {message}                       -> the user's reply
    GET    /v1/sessions/{id}           the transcript
    DELETE /v1/sessions/{id}
    GET    /healthz, /v1/info

Errors: 404 unknown/expired session, 409 a message to an ended session (or while the previous
message is still being answered), 422 a bad body (FastAPI's error list names each field), 500 when
the simulator itself fails (the session then ends).

Every handler is `async`, so the session store is only touched from the event loop; only the
simulator's generation runs in a thread (see `MicroBatcher`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, is_dataclass
from typing import Any

from fastapi import FastAPI, HTTPException, Response

from mimesis_rl.envs.base import SessionSpec, UserReply, UserSide
from mimesis_rl.serve.batcher import MicroBatcher
from mimesis_rl.serve.schemas import AgentMessage, NewSession, Reply, SessionOpened, Transcript
from mimesis_rl.serve.settings import ServeSettings
from mimesis_rl.serve.store import SessionNotFound, SessionRecord, SessionStore


def create_app(user: UserSide, settings: ServeSettings | None = None,
               clock: Callable[[], float] = time.monotonic) -> FastAPI:
    """An app serving `user`; `clock` drives session expiry (injectable for tests)."""
    settings = settings or ServeSettings()
    store = SessionStore(settings.max_sessions, settings.session_ttl_s, clock)
    batcher = MicroBatcher(user, settings.batch_window_ms / 1000, settings.max_batch)
    expose = settings.expose_reasoning

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    app = FastAPI(title="MIMESIS user simulator", version="1", lifespan=lifespan,
                  description="A trained user simulator behind HTTP: open a session, send agent messages, "
                              "read the user's replies.")
    app.state.store, app.state.batcher, app.state.settings = store, batcher, settings

    def find(session_id: str) -> SessionRecord:
        try:
            return store.get(session_id)
        except SessionNotFound:
            raise HTTPException(404, f"session {session_id!r} is unknown or has expired (sessions idle for "
                                     f"{settings.session_ttl_s:g} s are dropped, and the least recently used "
                                     f"beyond {settings.max_sessions}): start a new one") from None

    def reply_body(reply: UserReply) -> dict[str, Any]:
        body: dict[str, Any] = {"message": reply.message, "ended": reply.ended}
        if expose:
            body["reasoning"] = reply.reasoning
        return body

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "sessions": len(store), "batches": batcher.batches,
                "batched_requests": batcher.requests}

    @app.get("/v1/info")
    async def info() -> dict[str, Any]:
        manifest = getattr(user, "manifest", None)
        return {
            "model": settings.model,
            "name": user.name,
            "kind": getattr(manifest, "kind", None),
            "turn_format": getattr(manifest, "format", None),
            "generation": _plain(getattr(user, "generation", None) or getattr(manifest, "generation", None)),
            "expose_reasoning": expose,
            "batching": {"window_ms": settings.batch_window_ms, "max_batch": settings.max_batch},
            "sessions": {"max": settings.max_sessions, "ttl_s": settings.session_ttl_s, "open": len(store)},
        }

    @app.post("/v1/sessions", status_code=201, response_model=SessionOpened,
              response_model_exclude_unset=True)
    async def open_session(body: NewSession) -> dict[str, Any]:
        spec = SessionSpec(goal=body.goal, domain=body.domain, persona=dict(body.persona), seed=body.seed)
        handle = user.start([spec])[0]
        try:
            reply = await batcher.opening(handle)
        except Exception as exc:
            raise HTTPException(500, f"the simulator failed on the opening: {exc}") from exc
        record = SessionRecord(session_id=store.new_id(), spec=spec, handle=handle)
        record.add_user(reply)
        store.add(record)
        return {"session_id": record.session_id, **reply_body(reply)}

    @app.post("/v1/sessions/{session_id}/messages", response_model=Reply, response_model_exclude_unset=True)
    async def send_message(session_id: str, body: AgentMessage) -> dict[str, Any]:
        record = find(session_id)
        if record.ended:
            raise HTTPException(409, f"session {session_id!r} has ended"
                                     + (f" ({record.error})" if record.error else "") + ": start a new one")
        if record.busy:
            raise HTTPException(409, f"session {session_id!r} is still answering the previous message: "
                                     "send one message at a time")
        record.busy = True
        try:
            record.add_agent(body.message)
            try:
                reply = await batcher.respond(record.handle, body.message)
            except Exception as exc:
                record.ended, record.error = True, f"simulator error: {exc}"
                detail = f"the simulator failed; session {session_id!r} ended: {exc}"
                raise HTTPException(500, detail) from exc
            record.add_user(reply)
        finally:
            record.busy = False
        return reply_body(reply)

    @app.get("/v1/sessions/{session_id}", response_model=Transcript, response_model_exclude_unset=True)
    async def transcript(session_id: str) -> dict[str, Any]:
        record = find(session_id)
        turns = [t if expose else {k: v for k, v in t.items() if k != "reasoning"} for t in record.turns]
        spec = record.spec
        return {"session_id": record.session_id, "domain": spec.domain, "goal": spec.goal.model_dump(),
                "persona": spec.persona, "seed": spec.seed, "ended": record.ended,
                "turns": turns}

    @app.delete("/v1/sessions/{session_id}", status_code=204)
    async def delete(session_id: str) -> Response:
        find(session_id)
        store.delete(session_id)
        return Response(status_code=204)

    return app


def load_app(settings: ServeSettings, device: Any = "auto") -> FastAPI:
    """The app for `settings.model` (a folder, an MLflow URI or `assistant`), batched `max_batch` wide.

    device: as `UserSimulator.load` takes it; the CLI passes params.yaml's `models:` switch.
    """
    from mimesis_rl.simulator.api import UserSimulator

    simulator = UserSimulator.load(settings.model, base_model=settings.base_model, device=device,
                                   batch_size=settings.max_batch)
    return create_app(simulator, settings)


def _plain(value: Any) -> Any:
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value
