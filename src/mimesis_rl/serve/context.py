"""`ServeContext`: what every route of one app shares (the user side, settings, store, batcher,
metrics) and the steps several routes take (whose session, waiting for the simulator in time, the
reply's body, which model names are served).

Why its own module: the OpenAI-compatible routes, the sessions routes and the operations routes are
separate jobs in separate modules; this is the state they share, built once by `create_app`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from mimesis_rl.envs.protocols import UserReply, UserSide
from mimesis_rl.serve.batcher import MicroBatcher
from mimesis_rl.serve.errors import ApiError
from mimesis_rl.serve.metrics import ServeMetrics
from mimesis_rl.serve.settings import ServeSettings
from mimesis_rl.serve.store import SessionNotFound, SessionRecord, SessionStore


@dataclass
class ServeContext:
    """One app's shared state. domains: the domains a request may name; keys: the API keys (empty
    when auth is off); started: the server's start time (model cards' `created`)."""

    user: UserSide
    settings: ServeSettings
    store: SessionStore
    batcher: MicroBatcher
    metrics: ServeMetrics
    domains: list[str]
    keys: Any
    started: int = field(default_factory=lambda: int(time.time()))
    opening_now: Counter[str] = field(default_factory=Counter)  # sessions being opened per key

    @property
    def expose(self) -> bool:
        return self.settings.expose_reasoning

    @property
    def served(self) -> list[str]:
        return [self.settings.model]

    @property
    def aliases(self) -> set[str]:
        return {self.settings.model, getattr(self.user, "name", self.settings.model)}

    @staticmethod
    def owner(request: Request) -> str:
        return str(request.state.key_id)

    def find(self, session_id: str, key: str) -> SessionRecord:
        """The key's session; another key's session is as good as unknown (a 404 either way)."""
        try:
            record = self.store.get(session_id)
        except SessionNotFound:
            record = None
        if record is None or record.owner != key:
            settings = self.settings
            raise ApiError(404, f"session {session_id!r} is unknown or has expired (sessions idle for "
                                f"{settings.session_ttl_s:g} s are dropped, and the least recently used "
                                f"beyond {settings.max_sessions}): start a new one", "session_not_found",
                           "session_id")
        return record

    async def in_time(self, work: Awaitable[UserReply], what: str) -> UserReply:
        """The simulator's answer within `request_timeout_s` (a 504 otherwise, a 500 if it failed)."""
        timeout = self.settings.request_timeout_s
        try:
            reply = await asyncio.wait_for(work, timeout)
        except TimeoutError:
            self.metrics.timeouts.inc()
            raise ApiError(504, f"{what}: no answer within {timeout:g} s "
                                "(serve.request_timeout_s); the server is overloaded or the simulator "
                                "stalled",
                           "timeout") from None
        except Exception as exc:
            raise ApiError(500, f"the simulator failed on {what}: {exc}", "simulator_error") from exc
        self.metrics.observe_reply(reply)
        return reply

    def reply_body(self, reply: UserReply) -> dict[str, Any]:
        body: dict[str, Any] = {"message": reply.message, "ended": reply.ended}
        if "accept" in reply.meta:  # the decision the user took (a simulator deciding by its reasoning)
            body["accept"] = bool(reply.meta["accept"])
        if self.expose:
            body["reasoning"] = reply.reasoning
        return body

    def check_model(self, model: str) -> None:
        if model not in self.aliases:
            raise ApiError(404, f"model {model!r} is not served here; served: {', '.join(self.served)} "
                                "(GET /v1/models)", "model_not_found", "model")

    def model_card(self, model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": self.started, "owned_by": "mimesis",
                "mimesis": {"name": getattr(self.user, "name", model),
                            "card_style": getattr(self.user, "card_style", None),
                            "decide_by_reasoning": bool(getattr(self.user, "decide_by_reasoning", False))}}
