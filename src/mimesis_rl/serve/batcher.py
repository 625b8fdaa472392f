"""Micro-batching: requests that arrive close together share one batched simulator call.

`UserSimulator` answers many sessions in one `generate`, so a server that called it once per HTTP
request would waste most of the batch. The worker takes the first waiting request, then collects
more for up to `window_s` (or until `max_batch` are waiting) and makes one `opening(...)` call for
the new sessions, one `respond(...)` call for the messages, and one stateless `reply(...)` call per
seed for the chat-completions prompts (role-flipped message lists). Generation runs in a worker thread,
one batch at a time, so the event loop keeps accepting requests (they form the next batch) and the
simulator is never called from two threads at once.

A request that makes the shared call fail (a text the tokenizer cannot take, a generation error)
fails alone: the batch is retried in halves without it, and every other request is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from mimesis_rl.envs.protocols import UserReply, UserSide
from mimesis_rl.simulator.verdicts import turn_meta

log = logging.getLogger(__name__)
Kind = Literal["opening", "respond", "reply"]


@dataclass
class _Job:
    kind: Kind
    session: Any  # a session handle; for `reply`, the role-flipped prompt
    message: str | None
    future: asyncio.Future[UserReply]
    seed: int | None = None


def parsed_to_reply(turn: Any, decide_by_reasoning: bool = False) -> UserReply:
    """A `ParsedTurn` from `UserSimulator.reply` as a `UserReply`: a rejected output ends the dialogue,
    as in a session; a simulator that decides by its reasoning carries its decision as in a session."""
    if turn.ok:
        meta = turn_meta(turn, decide_by_reasoning)
        return UserReply(message=turn.message, reasoning=turn.reasoning, ended=turn.ended, meta=meta)
    return UserReply(message="", reasoning=turn.reasoning, ended=True,
                     meta={"error": turn.error, "end_reason": f"invalid_turn:{turn.error}",
                           "note": "the simulator produced no valid turn; the user left"})


class MicroBatcher:
    """Start it inside the running event loop (the app's lifespan), then await `opening`/`respond`."""

    def __init__(self, user: UserSide, window_s: float = 0.01, max_batch: int = 16,
                 on_batch: Callable[[str, int], None] | None = None) -> None:
        self.user = user
        self.on_batch = on_batch  # (kind, sessions) after each simulator call, for metrics
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

    async def reply(self, prompt: list[dict[str, str]], seed: int | None = None) -> UserReply:
        """The next user turn for one stateless role-flipped prompt (system card first)."""
        return await self._submit("reply", prompt, None, seed)

    async def _submit(self, kind: Kind, session: Any, message: str | None,
                      seed: int | None = None) -> UserReply:
        if self._queue is None or self._worker is None or self._worker.done():
            raise RuntimeError("the batcher is not running: start the app with its lifespan "
                               "(uvicorn does; a TestClient must be used as a context manager)")
        job = _Job(kind, session, message, asyncio.get_running_loop().create_future(), seed)
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
        groups: dict[tuple[str, int | None], list[_Job]] = {}
        for job in batch:  # cancelled (timed-out) requests are not generated
            if not job.future.done():
                groups.setdefault((job.kind, job.seed if job.kind == "reply" else None), []).append(job)
        for (kind, seed), jobs in groups.items():
            await self._answer_group(kind, seed, jobs)

    async def _call(self, kind: str, seed: int | None, jobs: list[_Job]) -> list[UserReply]:
        sessions = [j.session for j in jobs]
        if kind == "opening":
            replies = await asyncio.to_thread(self.user.opening, sessions)
        elif kind == "respond":
            messages = [j.message or "" for j in jobs]
            replies = await asyncio.to_thread(self.user.respond, sessions, messages)
        else:
            turns = await asyncio.to_thread(self.user.reply, sessions, seed)  # type: ignore[attr-defined]
            by_reasoning = bool(getattr(self.user, "decide_by_reasoning", False))
            replies = [parsed_to_reply(t, by_reasoning) for t in turns]
        if len(replies) != len(jobs):
            raise RuntimeError(f"{self.user.name}: {len(replies)} replies for {len(jobs)} sessions")
        return replies

    async def _answer_group(self, kind: str, seed: int | None, jobs: list[_Job]) -> None:
        """One call for the group. When it fails, the failure is isolated: the group is split in
        halves and each half retried, down to the one request that fails alone (a poison pill costs
        about 2·log2(n) extra calls; the others are answered). A failed call must leave its sessions
        as they were, which `UserSimulator` guarantees (it rolls a failed turn back)."""
        jobs = [j for j in jobs if not j.future.done()]
        if not jobs:
            return
        try:
            replies = await self._call(kind, seed, jobs)
        except Exception as exc:  # never the worker: the failing request(s) get the error
            if len(jobs) > 1:
                log.warning("%s(%d sessions) failed (%s: %s); retrying the batch in halves to isolate it",
                            kind, len(jobs), type(exc).__name__, exc)
                half = len(jobs) // 2
                await self._answer_group(kind, seed, jobs[:half])
                await self._answer_group(kind, seed, jobs[half:])
                return
            log.exception("%s(1 session) failed", kind)
            if not jobs[0].future.done():
                jobs[0].future.set_exception(exc)
            return
        self.batches += 1
        self.requests += len(jobs)
        if self.on_batch is not None:
            self.on_batch(kind, len(jobs))
        log.debug("%s: one call for %d session(s)", kind, len(jobs))
        for job, reply in zip(jobs, replies, strict=True):
            if not job.future.done():
                job.future.set_result(reply)
