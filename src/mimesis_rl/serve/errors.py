"""The server's one error shape: every refusal is JSON with FastAPI's `detail` and OpenAI's `error`
{message, type, param, code}, counted by reason in the metrics.

Why its own module: the routes raise `ApiError`, the app installs the handlers, and neither should
know how the other renders an error; a body that holds NaN or a lone surrogate must still render
(its 422, never a 500 from the JSON encoder).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from mimesis_rl.serve.chat import printable
from mimesis_rl.serve.guard import error_body
from mimesis_rl.serve.metrics import ServeMetrics

log = logging.getLogger(__name__)
STATUS_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 409: "conflict",
                415: "unsupported_media_type", 500: "server_error", 501: "not_implemented"}


class ApiError(HTTPException):
    """An HTTP error with OpenAI's `code` and `param` (the field at fault)."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status, message, dict(headers) if headers else None)
        self.code, self.param = code, param


def add_error_handlers(app: FastAPI, metrics: ServeMetrics) -> None:
    """HTTP errors, validation errors and crashes as the one JSON shape, each counted by reason."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = getattr(exc, "code", None) or STATUS_CODES.get(exc.status_code, f"http_{exc.status_code}")
        metrics.refused.labels(code).inc()
        body = error_body(exc.status_code, str(exc.detail), code, getattr(exc, "param", None))
        return JSONResponse(json_safe(body), exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = json_safe(jsonable_encoder(exc.errors()))  # the input echoed may hold NaN or a surrogate
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


def json_safe(value: Any) -> Any:
    """An error body that always renders as JSON: lone surrogates escaped, NaN/inf as text (a request
    that holds them must get its 422, not a 500 from the encoder)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
