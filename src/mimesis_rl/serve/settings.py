"""`ServeSettings` <- params.yaml `serve:` (the CLI's options override it)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimesis_rl.settings import from_section

KEYS_ENV = "MIMESIS_API_KEYS"


@dataclass(frozen=True)
class ServeSettings:
    """Knobs of the HTTP API.

    Model and batching
        model: what is served, as given (a folder, an MLflow URI, or `assistant`); the id that
            /v1/models lists and /v1/chat/completions expects in `model`.
        base_model: base for `assistant` and for adapters that do not bundle their base.
        batch_window_ms: after the first waiting request, how long the server waits for others to join
            the same batched simulator call. Larger = bigger batches (throughput), smaller = lower latency
            for a lone client; 0 batches only what is already queued.
        max_batch: a batch is sent at once when this many requests are waiting; 1 = batching off.

    Sessions
        max_sessions: beyond this many open sessions the least recently used one is dropped.
        session_ttl_s: a session idle this long is dropped; either way the client then gets a 404.
        max_sessions_per_key: open sessions one API key may hold (then 429), so one client cannot
            evict everyone else's sessions.
        domains: extra domains a session or chat request may name, beyond the built-in task domains
            and `chitchat`/`general` (an unknown domain is a 422).

    Safety
        auth: require `Authorization: Bearer <key>` on /v1/*; off only on a loopback host (the CLI's
            `--no-auth`). Keys: `api_keys`, the `MIMESIS_API_KEYS` environment variable
            (comma-separated) and `keys_file` (one key per line, `#` comments), all together.
        rate_per_s, rate_burst: per-key token bucket (sustained requests per second, burst size).
        max_body_bytes: larger request bodies are a 413.
        max_message_chars: a longer message (or goal text) is a 422 naming the field.
        max_messages: a chat request with more messages is a 422.
        request_timeout_s: a request that waits longer for the simulator gets a 504 (a session it
            belonged to ends: its state is no longer known).
        expose_reasoning: include the user's private reasoning in replies and transcripts (analysis
            only: an agent under training or evaluation must never see it).
        expose_private: include the values of the goal card's private slots in transcripts.

    Engine mode
        raw: /v1/chat/completions serves the model as a plain generation engine (what vLLM or SGLang
            would be): the messages are the model's own prompt (role-flipped, card first), a final
            assistant message with `continue_final_message` is continued, and the raw completion comes
            back unparsed. Clients: the `openai:` user spec (`models.inference.remote`), whose runtime
            does the checks. Sessions are unchanged.
    """

    model: str = "models:/mimesis-simulator@candidate"
    base_model: str = "models/base"
    batch_window_ms: float = 10.0
    max_batch: int = 16
    max_sessions: int = 1000
    session_ttl_s: float = 3600.0
    max_sessions_per_key: int = 256
    domains: tuple[str, ...] = ()
    auth: bool = True
    api_keys: tuple[str, ...] = ()
    keys_file: str | None = None
    rate_per_s: float = 20.0
    rate_burst: int = 200
    max_body_bytes: int = 65536
    max_message_chars: int = 4000
    max_messages: int = 200
    request_timeout_s: float = 120.0
    expose_reasoning: bool = False
    expose_private: bool = False
    raw: bool = False

    def __post_init__(self) -> None:
        if self.batch_window_ms < 0:
            raise ValueError(f"serve.batch_window_ms must be >= 0, got {self.batch_window_ms}")
        for name in ("max_batch", "max_sessions", "max_sessions_per_key", "rate_burst", "max_body_bytes",
                     "max_message_chars", "max_messages"):
            if getattr(self, name) < 1:
                raise ValueError(f"serve.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("session_ttl_s", "rate_per_s", "request_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"serve.{name} must be > 0, got {getattr(self, name)}")
        object.__setattr__(self, "domains", tuple(self.domains))
        object.__setattr__(self, "api_keys", tuple(self.api_keys))

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None, **overrides: Any) -> ServeSettings:
        """From params.yaml `serve:`; unknown keys are an error; `None` overrides are ignored."""
        if "api_keys" in (section or {}):
            raise ValueError("params.yaml `serve.api_keys`: keys never go in params.yaml (it is in git); "
                             f"use the {KEYS_ENV} environment variable or serve.keys_file")
        return from_section(cls, section, "serve", **{k: v for k, v in overrides.items() if v is not None})

    def keys(self, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """Every accepted key: `api_keys`, then $MIMESIS_API_KEYS, then `keys_file` (duplicates once)."""
        environ = os.environ if environ is None else environ
        found = list(self.api_keys)
        found += [k.strip() for k in environ.get(KEYS_ENV, "").split(",") if k.strip()]
        if self.keys_file:
            path = Path(self.keys_file)
            if not path.is_file():
                raise FileNotFoundError(f"serve.keys_file {str(path)!r}: no such file")
            for line in path.read_text().splitlines():
                key = line.split("#", 1)[0].strip()
                if key:
                    found.append(key)
        for key in found:
            if len(key) < 16 or any(c.isspace() for c in key):
                shown = key[:4] + "…"
                raise ValueError(f"API key {shown!r}: keys must be at least 16 characters without spaces")
        return tuple(dict.fromkeys(found))

    def required_keys(self, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """The keys to enforce: none when auth is off; an error when it is on and none are configured."""
        if not self.auth:
            return ()
        keys = self.keys(environ)
        if not keys:
            raise ValueError(f"no API keys configured: set {KEYS_ENV} (comma-separated) or serve.keys_file, "
                             "or start with --no-auth on a loopback host")
        return keys


def is_loopback(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1: the only hosts where `--no-auth` is allowed."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
