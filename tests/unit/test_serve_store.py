"""The serve package's session store (LRU + idle TTL) and settings, without a model."""

from __future__ import annotations

import pytest

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import SessionSpec, UserReply
from mimesis_rl.serve import ServeSettings, SessionNotFound, SessionRecord, SessionStore


def record(store: SessionStore, name: str) -> SessionRecord:
    spec = SessionSpec(goal=GoalCard(text="t"), domain="shopping")
    return store.add(SessionRecord(session_id=name, spec=spec, handle=None))


def test_least_recently_used_goes_first_and_use_counts() -> None:
    store = SessionStore(max_sessions=2, ttl_s=100)
    record(store, "a")
    record(store, "b")
    store.get("a")  # now "b" is the least recently used
    record(store, "c")
    assert len(store) == 2 and store.evicted == 1
    with pytest.raises(SessionNotFound):
        store.get("b")
    assert store.get("a").session_id == "a" and store.get("c").session_id == "c"


def test_idle_sessions_expire_and_use_keeps_them_alive() -> None:
    now = [0.0]
    store = SessionStore(max_sessions=10, ttl_s=60, clock=lambda: now[0])
    record(store, "idle")
    record(store, "used")
    now[0] = 50.0
    store.get("used")
    now[0] = 70.0  # "idle" was last used 70 s ago, "used" 20 s ago
    with pytest.raises(SessionNotFound):
        store.get("idle")
    assert store.get("used") and store.expired == 1
    store.delete("used")
    with pytest.raises(SessionNotFound):
        store.delete("used")


def test_record_keeps_reasoning_and_ends_with_the_user() -> None:
    rec = record(SessionStore(1, 1), "s")
    rec.add_user(UserReply(message="hi", reasoning="secret"))
    rec.add_agent("hello")
    left = UserReply(message="", reasoning="r", ended=True, meta={"error": "empty_message", "note": "left"})
    rec.add_user(left)
    assert rec.ended and [t["role"] for t in rec.turns] == ["user", "assistant", "user"]
    assert rec.turns[0]["reasoning"] == "secret" and rec.turns[2]["note"] == "left"


def test_settings_from_params_section() -> None:
    settings = ServeSettings.from_section({"model": "assistant", "max_batch": 4}, max_batch=None)
    assert settings.model == "assistant" and settings.max_batch == 4
    assert ServeSettings.from_section({"max_batch": 4}, max_batch=8).max_batch == 8
    with pytest.raises(ValueError, match="unknown key"):
        ServeSettings.from_section({"batch_window": 5})
    with pytest.raises(ValueError, match="max_batch"):
        ServeSettings(max_batch=0)
