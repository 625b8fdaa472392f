"""The simulator's HTTP API: an agent (or a person with curl, or an OpenAI client) talks to a frozen
user simulator.

    app = create_app(UserSimulator.load("models:/mimesis-simulator@candidate"), ServeSettings())
    uvicorn.run(app)     # or: MIMESIS_API_KEYS=... mimesis serve --model models:/mimesis-simulator@candidate

`POST /v1/chat/completions` is OpenAI-compatible and stateless (the caller is the agent; the answer
is the user's next message); `/v1/sessions` keeps dialogues on the server. Requests that arrive
within a short window share one batched simulator call (`MicroBatcher`); sessions live in a bounded
LRU/TTL store (`SessionStore`); `Guard` enforces API keys, per-key rate limits and body size, and
writes access logs and metrics (`/metrics`). The user's private reasoning and private goal slots stay
on the server unless it was started to expose them. Clients for RL frameworks: `serve.adapters`.
"""

from __future__ import annotations

from mimesis_rl.serve.app import create_app, load_app
from mimesis_rl.serve.batcher import MicroBatcher
from mimesis_rl.serve.errors import ApiError
from mimesis_rl.serve.guard import Guard, RateLimiter, key_id
from mimesis_rl.serve.settings import KEYS_ENV, ServeSettings, is_loopback
from mimesis_rl.serve.store import SessionNotFound, SessionRecord, SessionStore

__all__ = ["KEYS_ENV", "ApiError", "Guard", "MicroBatcher", "RateLimiter", "ServeSettings", "SessionNotFound",
           "SessionRecord", "SessionStore", "create_app", "is_loopback", "key_id", "load_app"]
