"""Run an app on a loopback port in a background thread (tests, examples, notebooks).

    with LocalServer(app) as base_url:        # e.g. http://127.0.0.1:41237
        httpx.get(base_url + "/healthz")
"""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn


class LocalServer:
    """uvicorn on 127.0.0.1 (an ephemeral port unless given); stops when the block ends."""

    def __init__(self, app: Any, port: int = 0, startup_timeout_s: float = 60.0) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                                access_log=False)
        self.server = uvicorn.Server(config)
        self.startup_timeout_s = startup_timeout_s
        self._thread = threading.Thread(target=self.server.run, name="mimesis-local-server", daemon=True)
        self.url = ""

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the local server did not start (see the log above)")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=30)
