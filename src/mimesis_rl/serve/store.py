"""Open sessions, bounded two ways: least recently used beyond `max_sessions`, and idle past `ttl_s`.

A server that keeps every session forever grows without bound under a long training run; a dropped
session answers 404 so a client knows to start a new one rather than wait.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.envs.protocols import SessionSpec, UserReply


class SessionNotFound(KeyError):
    """The id was never issued, was deleted, or its session was dropped (idle or evicted)."""


@dataclass
class SessionRecord:
    """One session as the server sees it: the simulator's handle plus the plain transcript."""

    session_id: str
    spec: SessionSpec
    handle: Any  # the user side's own session object (UserSimulator: role-flipped messages)
    owner: str = ""  # the key id that opened it; other keys get a 404
    turns: list[dict[str, Any]] = field(default_factory=list)
    ended: bool = False
    busy: bool = False  # a message is being answered; a second one would race it
    error: str | None = None
    last_used: float = 0.0

    def add_agent(self, message: str) -> None:
        self.turns.append({"role": "assistant", "content": message})

    def add_user(self, reply: UserReply) -> None:
        turn: dict[str, Any] = {"role": "user", "content": reply.message, "reasoning": reply.reasoning}
        problem = reply.meta.get("error") or reply.meta.get("end_reason")
        if problem and problem != "user_left":
            turn["note"] = str(reply.meta.get("note") or problem)
        self.turns.append(turn)
        self.ended = reply.ended


class SessionStore:
    """LRU + TTL map of session id -> `SessionRecord`; `clock` is injectable for tests."""

    def __init__(self, max_sessions: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self.clock = clock
        self._records: OrderedDict[str, SessionRecord] = OrderedDict()
        self.evicted = 0
        self.expired = 0

    def __len__(self) -> int:
        self._expire()
        return len(self._records)

    def count(self, owner: str) -> int:
        """Open sessions held by one key."""
        self._expire()
        return sum(1 for r in self._records.values() if r.owner == owner)

    def new_id(self) -> str:
        return uuid.uuid4().hex

    def add(self, record: SessionRecord) -> SessionRecord:
        self._expire()
        record.last_used = self.clock()
        self._records[record.session_id] = record
        self._records.move_to_end(record.session_id)
        while len(self._records) > self.max_sessions:
            self._records.popitem(last=False)
            self.evicted += 1
        return record

    def get(self, session_id: str) -> SessionRecord:
        """The record, marked as just used; `SessionNotFound` when unknown, deleted or dropped."""
        self._expire()
        record = self._records.get(session_id)
        if record is None:
            raise SessionNotFound(session_id)
        record.last_used = self.clock()
        self._records.move_to_end(session_id)
        return record

    def delete(self, session_id: str) -> None:
        self._expire()
        if self._records.pop(session_id, None) is None:
            raise SessionNotFound(session_id)

    def _expire(self) -> None:
        """Drop idle sessions; the oldest come first because every use moves a session to the end."""
        limit = self.clock() - self.ttl_s
        while self._records:
            oldest = next(iter(self._records.values()))
            if oldest.last_used > limit:
                break
            self._records.popitem(last=False)
            self.expired += 1
