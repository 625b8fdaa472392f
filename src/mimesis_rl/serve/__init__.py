"""The simulator's HTTP API: an agent (or a person with curl) talks to a frozen user simulator.

    app = create_app(UserSimulator.load("models:/mimesis-simulator@candidate"), ServeSettings())
    uvicorn.run(app)            # or: mimesis serve --model models:/mimesis-simulator@candidate

Requests that arrive within a short window share one batched simulator call (`MicroBatcher`);
sessions live in a bounded LRU/TTL store (`SessionStore`). The user's private reasoning stays on the
server unless it was started with `expose_reasoning`.
"""

from __future__ import annotations

from mimesis_rl.serve.app import create_app, load_app
from mimesis_rl.serve.batcher import MicroBatcher
from mimesis_rl.serve.settings import ServeSettings
from mimesis_rl.serve.store import SessionNotFound, SessionRecord, SessionStore

__all__ = ["MicroBatcher", "ServeSettings", "SessionNotFound", "SessionRecord", "SessionStore", "create_app",
           "load_app"]
