"""The sessions routes: dialogues kept on the server, one per `/v1/sessions/{id}`.

    POST   /v1/sessions                {domain, goal, persona?, seed?} -> the user's opening
    POST   /v1/sessions/{id}/messages  {message}                       -> the user's reply
    GET    /v1/sessions/{id}           the transcript (private slot values and reasoning hidden)
    DELETE /v1/sessions/{id}

A session belongs to the key that opened it; another key's session answers 404 like an unknown one.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request, Response

from mimesis_rl.envs.protocols import SessionSpec
from mimesis_rl.serve.chat import check_domain, check_length, check_text, normalise
from mimesis_rl.serve.context import ServeContext
from mimesis_rl.serve.errors import ApiError
from mimesis_rl.serve.schemas import AgentMessage, NewSession, Reply, SessionOpened, Transcript
from mimesis_rl.serve.store import SessionRecord

HIDDEN = "[private]"


def add_session_routes(app: FastAPI, ctx: ServeContext) -> None:
    """Register the sessions routes of `ctx`'s user on `app`."""
    user, settings, store = ctx.user, ctx.settings, ctx.store

    @app.post("/v1/sessions", status_code=201, response_model=SessionOpened,
              response_model_exclude_unset=True)
    async def open_session(body: NewSession, request: Request) -> dict[str, Any]:
        key = ctx.owner(request)
        check_text(body.model_dump())
        check_domain(body.domain, ctx.domains, ("domain",))
        check_length(body.goal.text, settings.max_message_chars, ("goal", "text"))
        held = store.count(key) + ctx.opening_now[key]
        if held >= settings.max_sessions_per_key:
            raise ApiError(429, f"too many open sessions for this key ({held}; serve.max_sessions_per_key = "
                                f"{settings.max_sessions_per_key}): DELETE finished ones or let idle ones "
                                "expire", "too_many_sessions")
        spec = SessionSpec(goal=body.goal, domain=body.domain, persona=dict(body.persona), seed=body.seed)
        ctx.opening_now[key] += 1
        try:
            handle = user.start([spec])[0]
            reply = await ctx.in_time(ctx.batcher.opening(handle), "the opening")
            record = SessionRecord(session_id=store.new_id(), spec=spec, handle=handle, owner=key)
            record.add_user(reply)
            store.add(record)
        finally:
            ctx.opening_now[key] -= 1
        return {"session_id": record.session_id, **ctx.reply_body(reply)}

    @app.post("/v1/sessions/{session_id}/messages", response_model=Reply, response_model_exclude_unset=True)
    async def send_message(session_id: str, body: AgentMessage, request: Request) -> dict[str, Any]:
        record = ctx.find(session_id, ctx.owner(request))
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
                reply = await ctx.in_time(ctx.batcher.respond(record.handle, message), "the reply")
            except ApiError as exc:  # the simulator's view of the session is no longer known
                record.ended, record.error = True, exc.code
                raise
            record.add_user(reply)
        finally:
            record.busy = False
        return {**ctx.reply_body(reply), **({"replaced_characters": replaced} if replaced else {})}

    @app.get("/v1/sessions/{session_id}", response_model=Transcript, response_model_exclude_unset=True)
    async def transcript(session_id: str, request: Request) -> dict[str, Any]:
        record = ctx.find(session_id, ctx.owner(request))
        turns = [t if ctx.expose else {k: v for k, v in t.items() if k != "reasoning"} for t in record.turns]
        spec = record.spec
        goal = spec.goal.model_dump()
        if not settings.expose_private:
            goal["slots"] = {k: HIDDEN if k in spec.goal.private else v for k, v in goal["slots"].items()}
        return {"session_id": record.session_id, "domain": spec.domain, "goal": goal,
                "persona": spec.persona, "seed": spec.seed, "ended": record.ended,
                "turns": turns}

    @app.delete("/v1/sessions/{session_id}", status_code=204)
    async def delete(session_id: str, request: Request) -> Response:
        ctx.find(session_id, ctx.owner(request))
        store.delete(session_id)
        return Response(status_code=204)
