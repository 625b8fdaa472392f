"""The FastAPI app over any batched user side (`UserSimulator` in practice).

    POST   /v1/chat/completions        OpenAI-compatible and stateless: the caller is the agent, the
                                       answer is the simulated user's next message (see serve.chat)
    GET    /v1/models[/{id}]           the served simulator (its registry URI / folder / `assistant`)
    POST   /v1/sessions                {domain, goal, persona?, seed?} -> the user's opening
    POST   /v1/sessions/{id}/messages  {message}                       -> the user's reply
    GET    /v1/sessions/{id}           the transcript (private slot values and reasoning hidden)
    DELETE /v1/sessions/{id}
    GET    /healthz, /metrics (Prometheus), /v1/info

Every error is JSON with FastAPI's `detail` and OpenAI's `error` {message, type, param, code}:
401 no/bad key, 404 unknown/expired/foreign session or unknown model, 409 a message to an ended
session (or while the previous one is being answered), 413 body too large, 422 a bad field (named),
429 rate limit or too many open sessions for the key, 504 the simulator took too long, 500 the
simulator failed (the session then ends). The server itself stays up.

Every handler is `async`, so the session store is only touched from the event loop; only the
simulator's generation runs in a thread (see `MicroBatcher`).

Failure isolation: text is checked at the edge (serve.chat: lone surrogates are a 422 naming the
field anywhere, NUL/control characters too outside dialogue messages, where they are replaced by
U+FFFD and counted), and a request that fails inside a shared batch fails
alone: the batcher retries the rest without it (see `MicroBatcher`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, is_dataclass
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from mimesis_rl.envs.protocols import SessionSpec, UserReply, UserSide
from mimesis_rl.serve.batcher import MicroBatcher
from mimesis_rl.serve.chat import (
    build_prompt,
    check_chat,
    check_domain,
    check_length,
    check_text,
    invalid,
    known_domains,
    normalise,
    printable,
)
from mimesis_rl.serve.guard import Guard, RateLimiter, error_body
from mimesis_rl.serve.metrics import CONTENT_TYPE, ServeMetrics
from mimesis_rl.serve.schemas import AgentMessage, ChatRequest, NewSession, Reply, SessionOpened, Transcript
from mimesis_rl.serve.settings import ServeSettings
from mimesis_rl.serve.store import SessionNotFound, SessionRecord, SessionStore

log = logging.getLogger(__name__)
STATUS_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 409: "conflict",
                415: "unsupported_media_type", 500: "server_error", 501: "not_implemented"}
HIDDEN = "[private]"


class ApiError(HTTPException):
    """An HTTP error with OpenAI's `code` and `param` (the field at fault)."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status, message, dict(headers) if headers else None)
        self.code, self.param = code, param


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
    expose, expose_private = settings.expose_reasoning, settings.expose_private
    domains = known_domains(settings.domains)
    served = [settings.model]
    aliases = {settings.model, getattr(user, "name", settings.model)}
    started = int(time.time())
    opening_now: Counter[str] = Counter()  # sessions being opened per key (not yet in the store)

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

    # -- errors: one JSON shape, counted by reason -----------------------------------------------

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = getattr(exc, "code", None) or STATUS_CODES.get(exc.status_code, f"http_{exc.status_code}")
        metrics.refused.labels(code).inc()
        body = error_body(exc.status_code, str(exc.detail), code, getattr(exc, "param", None))
        return JSONResponse(_json_safe(body), exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _json_safe(jsonable_encoder(exc.errors()))  # the input echoed may hold NaN or a surrogate
        fields = [".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body" for e in errors]
        message = "; ".join(f"{f}: {e.get('msg', 'invalid')}" for f, e in zip(fields, errors, strict=True))
        metrics.refused.labels("invalid_request").inc()
        return JSONResponse(error_body(422, message, "invalid_request", fields[0] if fields else None,
                                       detail=errors), 422)

    @app.exception_handler(Exception)
    async def crash(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        metrics.refused.labels("server_error").inc()
        return JSONResponse(error_body(500, f"internal error: {type(exc).__name__}", "server_error"), 500)

    # -- helpers ---------------------------------------------------------------------------------

    def owner(request: Request) -> str:
        return str(request.state.key_id)

    def find(session_id: str, key: str) -> SessionRecord:
        try:
            record = store.get(session_id)
        except SessionNotFound:
            record = None
        if record is None or record.owner != key:  # another key's session is as good as unknown
            raise ApiError(404, f"session {session_id!r} is unknown or has expired (sessions idle for "
                                f"{settings.session_ttl_s:g} s are dropped, and the least recently used "
                                f"beyond {settings.max_sessions}): start a new one", "session_not_found",
                           "session_id")
        return record

    async def in_time(work: Awaitable[UserReply], what: str) -> UserReply:
        try:
            reply = await asyncio.wait_for(work, settings.request_timeout_s)
        except TimeoutError:
            metrics.timeouts.inc()
            raise ApiError(504, f"{what}: no answer within {settings.request_timeout_s:g} s "
                                "(serve.request_timeout_s); the server is overloaded or the simulator "
                                "stalled",
                           "timeout") from None
        except Exception as exc:
            raise ApiError(500, f"the simulator failed on {what}: {exc}", "simulator_error") from exc
        metrics.observe_reply(reply)
        return reply

    def reply_body(reply: UserReply) -> dict[str, Any]:
        body: dict[str, Any] = {"message": reply.message, "ended": reply.ended}
        if expose:
            body["reasoning"] = reply.reasoning
        return body

    def check_model(model: str) -> None:
        if model not in aliases:
            raise ApiError(404, f"model {model!r} is not served here; served: {', '.join(served)} "
                                "(GET /v1/models)", "model_not_found", "model")

    def model_card(model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": started, "owned_by": "mimesis",
                "mimesis": {"name": getattr(user, "name", model),
                            "card_style": getattr(user, "card_style", None)}}

    # -- operations ------------------------------------------------------------------------------

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "sessions": len(store), "batches": batcher.batches,
                "batched_requests": batcher.requests}

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

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
            "expose_reasoning": expose,
            "expose_private": expose_private,
            "raw": settings.raw,
            "auth": bool(keys),
            "domains": domains,
            "batching": {"window_ms": settings.batch_window_ms, "max_batch": settings.max_batch},
            "sessions": {"max": settings.max_sessions, "ttl_s": settings.session_ttl_s,
                         "max_per_key": settings.max_sessions_per_key, "open": len(store)},
            "limits": {"rate_per_s": settings.rate_per_s, "rate_burst": settings.rate_burst,
                       "max_body_bytes": settings.max_body_bytes,
                       "max_message_chars": settings.max_message_chars, "max_messages": settings.max_messages,
                       "request_timeout_s": settings.request_timeout_s},
        }

    # -- OpenAI-compatible -----------------------------------------------------------------------

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card(m) for m in served]}

    @app.get("/v1/models/{model:path}")
    async def model(model: str) -> dict[str, Any]:
        check_model(model)
        return model_card(model)

    raw_lock = threading.Lock()  # raw completions share the model with the batcher's thread: one at a time

    async def raw_completion(body: ChatRequest) -> dict[str, Any]:
        """`serve.raw`: the model as a plain engine (see ServeSettings.raw): prompt in, text out."""
        if not callable(getattr(user, "continue_raw", None)):
            raise ApiError(501, f"{user.name} cannot serve raw completions", "not_implemented")
        if body.stream:
            raise invalid(("stream",), "streaming is not supported: send stream=false")
        if not body.messages:
            raise invalid(("messages",), "no messages")
        if len(body.messages) > settings.max_messages:
            raise invalid(("messages",),
                          f"{len(body.messages)} messages; the limit is {settings.max_messages}")
        messages = []
        for i, message in enumerate(body.messages):
            check_length(message.text(), settings.max_message_chars, ("messages", i, "content"),
                         allow_empty=True)
            role = "system" if message.role == "developer" else message.role
            messages.append({"role": role, "content": message.text()})
        prefill = ""
        if body.continue_final_message:
            if messages[-1]["role"] != "assistant":
                raise invalid(("messages", len(messages) - 1, "role"),
                              "continue_final_message needs a final assistant message to continue")
            prefill = messages.pop()["content"]
        sampling, ignored = user.sampling, []
        if body.temperature is not None:
            sampling = (dataclasses.replace(sampling, do_sample=False) if body.temperature <= 0 else
                        dataclasses.replace(sampling, do_sample=True, temperature=body.temperature))
        if body.top_p is not None:
            sampling = dataclasses.replace(sampling, top_p=body.top_p)
        if body.max_tokens is not None and body.max_tokens != sampling.max_new_tokens:
            ignored.append("max_tokens")  # the served simulator's turn budget is fixed (GET /v1/info)

        def run() -> Any:
            with raw_lock:
                return user.continue_raw(messages, prefill, body.seed or 0, sampling)

        try:
            gen = await asyncio.wait_for(asyncio.to_thread(run), settings.request_timeout_s)
        except TimeoutError:
            metrics.timeouts.inc()
            raise ApiError(504, f"no completion within {settings.request_timeout_s:g} s", "timeout") from None
        if gen is None:
            raise invalid(("messages",), "the prompt leaves no room for a completion in the model's context")
        text = user.runner.chat.decode(gen.token_ids)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": body.model, "system_fingerprint": None,
            "usage": {"completion_tokens": len(gen.token_ids)},
            "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop" if gen.stopped else "length",
                         "message": {"role": "assistant", "content": text, "refusal": None}}],
            "mimesis": {"raw": True, "ignored": ignored},
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatRequest) -> dict[str, Any]:
        replaced = check_chat(body)  # the edge rule (serve.chat): a 422 naming the field, or replaced
        check_model(body.model)
        if settings.raw:
            return await raw_completion(body)
        if not all(callable(getattr(user, m, None)) for m in ("reply", "card", "past_turn")):
            raise ApiError(501, f"{user.name} answers sessions only (no stateless `reply`): use /v1/sessions",
                           "not_implemented")
        prompt = build_prompt(body, user, domains, settings.max_message_chars, settings.max_messages)
        reply = await in_time(batcher.reply(prompt.messages, body.seed), "the user's next message")
        extra: dict[str, Any] = {"ended": reply.ended, "domain": prompt.spec.domain,
                                 "ignored": body.ignored()}
        if replaced:
            extra["replaced_characters"] = replaced
        if reply.meta.get("error"):
            extra["rejected"] = str(reply.meta["error"])
        if expose:
            extra["reasoning"] = reply.reasoning
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": body.model, "system_fingerprint": None, "usage": None,
            # finish_reason: "stop" = the user has left (the dialogue is over); null = the user stays.
            "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop" if reply.ended else None,
                         "message": {"role": "assistant", "content": reply.message, "refusal": None}}],
            "mimesis": extra,
        }

    # -- sessions --------------------------------------------------------------------------------

    @app.post("/v1/sessions", status_code=201, response_model=SessionOpened,
              response_model_exclude_unset=True)
    async def open_session(body: NewSession, request: Request) -> dict[str, Any]:
        key = owner(request)
        check_text(body.model_dump())
        check_domain(body.domain, domains, ("domain",))
        check_length(body.goal.text, settings.max_message_chars, ("goal", "text"))
        held = store.count(key) + opening_now[key]
        if held >= settings.max_sessions_per_key:
            raise ApiError(429, f"too many open sessions for this key ({held}; serve.max_sessions_per_key = "
                                f"{settings.max_sessions_per_key}): DELETE finished ones or let idle ones "
                                "expire", "too_many_sessions")
        spec = SessionSpec(goal=body.goal, domain=body.domain, persona=dict(body.persona), seed=body.seed)
        opening_now[key] += 1
        try:
            handle = user.start([spec])[0]
            reply = await in_time(batcher.opening(handle), "the opening")
            record = SessionRecord(session_id=store.new_id(), spec=spec, handle=handle, owner=key)
            record.add_user(reply)
            store.add(record)
        finally:
            opening_now[key] -= 1
        return {"session_id": record.session_id, **reply_body(reply)}

    @app.post("/v1/sessions/{session_id}/messages", response_model=Reply, response_model_exclude_unset=True)
    async def send_message(session_id: str, body: AgentMessage, request: Request) -> dict[str, Any]:
        record = find(session_id, owner(request))
        check_text(body.model_dump(), controls=True)
        message, replaced = normalise(body.message)
        check_length(message, settings.max_message_chars, ("message",))
        if record.ended:
            raise ApiError(409, f"session {session_id!r} has ended"
                                + (f" ({record.error})" if record.error else "") + ": start a new one",
                           "session_ended")
        if record.busy:
            raise ApiError(409, f"session {session_id!r} is still answering the previous message: "
                                "send one message at a time", "session_busy")
        record.busy = True
        try:
            record.add_agent(message)
            try:
                reply = await in_time(batcher.respond(record.handle, message), "the reply")
            except ApiError as exc:  # the simulator's view of the session is no longer known
                record.ended, record.error = True, exc.code
                raise
            record.add_user(reply)
        finally:
            record.busy = False
        return {**reply_body(reply), **({"replaced_characters": replaced} if replaced else {})}

    @app.get("/v1/sessions/{session_id}", response_model=Transcript, response_model_exclude_unset=True)
    async def transcript(session_id: str, request: Request) -> dict[str, Any]:
        record = find(session_id, owner(request))
        turns = [t if expose else {k: v for k, v in t.items() if k != "reasoning"} for t in record.turns]
        spec = record.spec
        goal = spec.goal.model_dump()
        if not expose_private:
            goal["slots"] = {k: HIDDEN if k in spec.goal.private else v for k, v in goal["slots"].items()}
        return {"session_id": record.session_id, "domain": spec.domain, "goal": goal,
                "persona": spec.persona, "seed": spec.seed, "ended": record.ended,
                "turns": turns}

    @app.delete("/v1/sessions/{session_id}", status_code=204)
    async def delete(session_id: str, request: Request) -> Response:
        find(session_id, owner(request))
        store.delete(session_id)
        return Response(status_code=204)

    return app


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


def _json_safe(value: Any) -> Any:
    """An error body that always renders as JSON: lone surrogates escaped, NaN/inf as text (a request
    that holds them must get its 422, not a 500 from the encoder)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {_json_safe(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value
