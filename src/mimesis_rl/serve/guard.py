"""What stands between the network and the simulator: API keys, per-key rate limits, a body-size cap,
request ids, access logs and request metrics — one ASGI middleware around the whole app.

Order per request under /v1: key (401) -> rate limit (429) -> body size (413) -> the app. /healthz,
/metrics and the OpenAPI docs are open (they carry no dialogue). Access logs are one JSON line per
request on the `mimesis_rl.serve.access` logger and never contain message text or keys: a key is
logged as `key-<first 12 hex of its sha256>`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from mimesis_rl.serve.metrics import ServeMetrics

access_log = logging.getLogger("mimesis_rl.serve.access")
OPEN_PATHS = ("/healthz", "/metrics", "/docs", "/redoc", "/openapi.json")
NO_AUTH = "anonymous"


def key_id(key: str) -> str:
    """A stable, non-reversible name for a key, for logs, limits and session ownership."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def error_body(status: int, message: str, code: str, param: str | None = None,
               detail: Any = None) -> dict[str, Any]:
    """The one error shape: FastAPI's `detail` (kept for the sessions API) and OpenAI's `error` object
    (what OpenAI client libraries read), both naming what is wrong."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status in (401, 403):
        kind = "authentication_error"
    elif status == 429:
        kind = "rate_limit_error"
    return {"detail": message if detail is None else detail,
            "error": {"message": message, "type": kind, "param": param, "code": code}}


class RateLimiter:
    """Per-key token buckets: `rate_per_s` sustained, `burst` at once. `clock` injectable for tests."""

    def __init__(self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate_per_s
        self.burst = float(burst)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, key: str) -> float:
        """0 when the request may go (a token is spent), else the seconds until a token is back."""
        now = self.clock()
        tokens, at = self._buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens >= 1:
            self._buckets[key] = (tokens - 1, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1 - tokens) / self.rate


class Guard:
    """ASGI middleware; `keys` empty means auth is off (the caller checked that this is allowed)."""

    def __init__(self, app: Any, keys: Sequence[str], limiter: RateLimiter, max_body_bytes: int,
                 metrics: ServeMetrics) -> None:
        self.app = app
        self.keys = [k.encode() for k in keys]
        self.limiter = limiter
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any],
                       send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        request_id = uuid.uuid4().hex[:16]
        state = scope.setdefault("state", {})
        state["request_id"], state["key_id"] = request_id, NO_AUTH
        seen: dict[str, Any] = {"status": 500, "bytes_in": 0}

        async def send_tagged(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode()))
            await send(message)

        try:
            refusal = None
            if scope["path"].startswith("/v1/") or scope["path"] == "/v1":
                refusal = self._admit(scope, state)
            if refusal is None:
                body, refusal = await self._read_body(scope, receive)
                if refusal is None:
                    seen["bytes_in"] = len(body)
                    await self.app(scope, _replay(body, receive), send_tagged)
            if refusal is not None:
                status, message, code, headers = refusal
                self.metrics.refused.labels(code).inc()
                await _send_json(send_tagged, status, error_body(status, message, code), headers)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            seconds = time.perf_counter() - start
            status = seen["status"]
            self.metrics.requests.labels(template, scope["method"], str(status)).inc()
            self.metrics.latency.labels(template).observe(seconds)
            access_log.info(json.dumps({
                "request_id": request_id, "key": state.get("key_id"), "method": scope["method"],
                "route": template, "status": status, "ms": round(seconds * 1000, 1),
                "bytes_in": seen["bytes_in"], "session": (scope.get("path_params") or {}).get("session_id"),
            }))

    def _admit(self, scope: dict[str, Any], state: dict[str, Any]) -> tuple[int, str, str, list] | None:
        """None when the request may go on; else (status, message, code, extra headers)."""
        if self.keys:
            header = _header(scope, b"authorization")
            challenge = [(b"www-authenticate", b'Bearer realm="mimesis"')]
            if not header:
                return (401, "missing API key: send `Authorization: Bearer <key>` (keys come from "
                             "MIMESIS_API_KEYS or serve.keys_file on the server)", "missing_api_key",
                        challenge)
            scheme, _, token = header.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                return (401, "malformed Authorization header: expected `Bearer <key>`", "invalid_api_key",
                        challenge)
            raw = token.encode()
            # compare against every key, so the time taken does not tell which one nearly matched
            if not any([hmac.compare_digest(raw, k) for k in self.keys]):
                return (401, "invalid API key", "invalid_api_key", challenge)
            state["key_id"] = key_id(token)
        wait = self.limiter.take(state["key_id"])
        if wait > 0:
            retry = max(1, int(wait + 0.999))
            return (429, f"rate limit exceeded for this key ({self.limiter.rate:g} requests/s, bursts of "
                         f"{self.limiter.burst:g}): retry after {retry} s", "rate_limited",
                    [(b"retry-after", str(retry).encode())])
        return None

    async def _read_body(self, scope: dict[str, Any], receive: Callable[..., Any]
                         ) -> tuple[bytes, tuple[int, str, str, list] | None]:
        """The whole body (small by contract), or a 413 as soon as it is known to be too large."""
        limit = self.max_body_bytes
        declared = _header(scope, b"content-length")
        too_large = (413, f"request body too large: the limit is {limit} bytes (serve.max_body_bytes)",
                     "body_too_large", [])
        if declared is not None:
            if not declared.isdigit():
                return b"", (400, f"bad Content-Length header {declared!r}", "bad_content_length", [])
            if int(declared) > limit:
                return b"", too_large
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return b"", too_large
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks), None


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _replay(body: bytes, receive: Callable[..., Any]) -> Callable[..., Any]:
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # then wait for the disconnect, as the server would report it

    return replay


async def _send_json(send: Callable[..., Any], status: int, body: dict[str, Any], headers: list) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()), *headers]})
    await send({"type": "http.response.body", "body": data})
