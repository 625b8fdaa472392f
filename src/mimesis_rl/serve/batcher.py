"""Micro-batching: requests that arrive close together share one batched simulator call.

`UserSimulator` answers many sessions in one `generate`, so a server that called it once per HTTP
request would waste most of the batch. The worker takes the first waiting request, then collects
more for up to `window_s` (or until `max_batch` are waiting) and makes one `opening(...)` call for
the new sessions and one `respond(...)` call for the messages. Generation runs in a worker thread,
one batch at a time, so the event loop keeps accepting requests (they form the next batch) and the
simulator is never called from two threads at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Literal

from mimesis_rl.envs.base import UserReply, UserSide

log = logging.getLogger(__name__)
Kind = Literal["opening", "respond"]


@dataclass
class _Job:
    kind: Kind
    session: Any
    message: str | None
    future: asyncio.Future[UserReply]


class MicroBatcher:
    """Start it inside the running event loop (the app's lifespan), then await `opening`/`respond`."""

    def __init__(self, user: UserSide, window_s: float = 0.01, max_batch: int = 16) -> None:
        self.user = user
        self.window_s = max(0.0, window_s)
        self.max_batch = max(1, max_batch)
        self.batches = 0  # simulator calls made
        self.requests = 0  # requests answered through them
        self._queue: asyncio.Queue[_Job] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._batch: list[_Job] = []  # the batch being answered

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._worker = asyncio.create_task(self._run(), name="mimesis-serve-batcher")

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        pending = list(self._batch)
        while self._queue is not None and not self._queue.empty():
            pending.append(self._queue.get_nowait())
        for job in pending:
            if not job.future.done():
                job.future.set_exception(RuntimeError("the server is shutting down"))
        self._worker = None

    async def opening(self, session: Any) -> UserReply:
        return await self._submit("opening", session, None)

    async def respond(self, session: Any, message: str) -> UserReply:
        return await self._submit("respond", session, message)

    async def _submit(self, kind: Kind, session: Any, message: str | None) -> UserReply:
        if self._queue is None or self._worker is None or self._worker.done():
            raise RuntimeError("the batcher is not running: start the app with its lifespan "
                               "(uvicorn does; a TestClient must be used as a context manager)")
        job = _Job(kind, session, message, asyncio.get_running_loop().create_future())
        await self._queue.put(job)
        return await job.future

    async def _run(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            deadline = loop.time() + self.window_s
            while len(batch) < self.max_batch:
                if not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), remaining))
                except TimeoutError:
                    break
            self._batch = batch
            await self._answer(batch)
            self._batch = []

    async def _answer(self, batch: list[_Job]) -> None:
        for kind in ("opening", "respond"):
            jobs = [j for j in batch if j.kind == kind and not j.future.done()]
            if not jobs:
                continue
            sessions = [j.session for j in jobs]
            try:
                if kind == "opening":
                    replies = await asyncio.to_thread(self.user.opening, sessions)
                else:
                    messages = [j.message or "" for j in jobs]
                    replies = await asyncio.to_thread(self.user.respond, sessions, messages)
                if len(replies) != len(jobs):
                    raise RuntimeError(f"{self.user.name}: {len(replies)} replies for {len(jobs)} sessions")
            except Exception as exc:  # one failed call fails its own requests, never the worker
                log.exception("%s(%d sessions) failed", kind, len(jobs))
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(exc)
                continue
            self.batches += 1
            self.requests += len(jobs)
            log.debug("%s: one call for %d session(s)", kind, len(jobs))
            for job, reply in zip(jobs, replies, strict=True):
                if not job.future.done():
                    job.future.set_result(reply)
