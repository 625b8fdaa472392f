"""The simulator's HTTP API against a real tiny simulator: session lifecycle, micro-batching
(counted on the real simulator's calls), hidden reasoning, 404/409/422, and the CLI's app loader."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sim_support import CONVERSATIONS, REPO, tiny_base
from typer.testing import CliRunner

from mimesis_rl.config import load_params
from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.serve import ServeSettings, create_app, load_app
from mimesis_rl.simulator.api import UserSimulator
from mimesis_rl.simulator.sft import SFTSettings, train_sft

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONVERSATIONS_BY_ID = {c.conversation_id: c for c in read_conversations(CONVERSATIONS)}


def session_body(conversation_id: str) -> dict[str, Any]:
    """A goal and persona the tiny simulator was trained on (so it speaks in its turn format)."""
    c = CONVERSATIONS_BY_ID[conversation_id]
    return {"domain": c.domain, "goal": c.goal.model_dump(), "persona": c.persona or {}, "seed": 3}


def agent_lines(conversation_id: str) -> list[str]:
    return [t.content for t in CONVERSATIONS_BY_ID[conversation_id].turns if t.role == "assistant"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny simulator trained (full fine-tune, ~100 steps) until it writes `<think>…</think>` + a message:
    sim_support's 2-step adapter still only emits blank lines, which end every session at once."""
    root = tmp_path_factory.mktemp("serve")
    base = tiny_base(root / "base")
    settings = SFTSettings.from_section({
        "train": str(CONVERSATIONS), "val": None, "base_model": str(base), "device": "cpu", "method": "full",
        "max_length": 256, "batch_size": 4, "max_steps": 100, "learning_rate": 1e-2, "logging_steps": 50,
        "save_steps": 1000, "output_dir": str(root / "simulator"), "checkpoint_dir": str(root / "ckpt"),
        "generation": {"max_new_tokens": 32, "do_sample": False, "max_retries": 0},
    })
    train_sft(settings, seed=0)
    return root / "simulator"


@pytest.fixture(scope="module")
def simulator(folder: Path) -> UserSimulator:
    return UserSimulator.load(folder, device="cpu", batch_size=8)


class CountingUser:
    """The real simulator, with each batched call recorded as (method, number of sessions)."""

    def __init__(self, simulator: UserSimulator) -> None:
        self.simulator = simulator
        self.calls: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.simulator, name)

    def opening(self, sessions: list[Any]) -> list[Any]:
        self.calls.append(("opening", len(sessions)))
        return self.simulator.opening(sessions)

    def respond(self, sessions: list[Any], messages: list[str]) -> list[Any]:
        self.calls.append(("respond", len(sessions)))
        return self.simulator.respond(sessions, messages)


def client_for(user: Any, **settings: Any) -> TestClient:
    return TestClient(create_app(user, ServeSettings(model="tiny-test-simulator", **settings)))


def test_session_lifecycle_with_hidden_reasoning(simulator: UserSimulator) -> None:
    user = CountingUser(simulator)
    with client_for(user, batch_window_ms=0) as client:
        opened = client.post("/v1/sessions", json=session_body("shop-1"))
        assert opened.status_code == 201, opened.text
        body = opened.json()
        assert set(body) == {"session_id", "message", "ended"}  # no reasoning by default
        assert not body["ended"] and body["message"], "the trained tiny simulator should open the dialogue"
        sid = body["session_id"]

        replies = []
        for line in agent_lines("shop-1"):
            reply = client.post(f"/v1/sessions/{sid}/messages", json={"message": line})
            assert reply.status_code == 200, reply.text
            assert set(reply.json()) == {"message", "ended"}
            assert "<think>" not in reply.json()["message"]
            replies.append(reply.json())
            if reply.json()["ended"]:
                break
        assert replies[-1]["ended"], "the tiny simulator leaves within one dialogue's agent turns"
        gone = client.post(f"/v1/sessions/{sid}/messages", json={"message": "Still there?"})
        assert gone.status_code == 409 and "has ended" in gone.json()["detail"]

        transcript = client.get(f"/v1/sessions/{sid}").json()
        assert transcript["ended"] and transcript["domain"] == "shopping" and transcript["seed"] == 3
        assert transcript["goal"]["private"] == ["budget"]
        roles = [t["role"] for t in transcript["turns"]]
        assert roles == ["user"] + ["assistant", "user"] * len(replies)
        assert all("reasoning" not in t for t in transcript["turns"])
        assert transcript["turns"][0]["content"] == body["message"]

        assert client.get("/healthz").json()["status"] == "ok"
        assert client.delete(f"/v1/sessions/{sid}").status_code == 204
        assert client.get(f"/v1/sessions/{sid}").status_code == 404
        assert client.delete(f"/v1/sessions/{sid}").status_code == 404
    # A zero window sends each lone request on its own: one session per call.
    assert user.calls == [("opening", 1)] + [("respond", 1)] * len(replies)


def test_concurrent_requests_share_one_simulator_call(simulator: UserSimulator) -> None:
    user = CountingUser(simulator)
    # A long window that a full batch cuts short: the test never waits on the clock.
    with client_for(user, batch_window_ms=60_000, max_batch=2) as client, ThreadPoolExecutor(2) as pool:
        ids = ["shop-1", "chat-1"]
        opened = list(pool.map(lambda c: client.post("/v1/sessions", json=session_body(c)), ids))
        assert [r.status_code for r in opened] == [201, 201]
        assert user.calls == [("opening", 2)]
        assert not any(r.json()["ended"] for r in opened)
        sids = [r.json()["session_id"] for r in opened]
        lines = [agent_lines(c)[0] for c in ids]

        def send(i: int) -> httpx.Response:
            return client.post(f"/v1/sessions/{sids[i]}/messages", json={"message": lines[i]})

        first = pool.submit(send, 0)  # waits in the batch for a second request
        store = client.app.state.store  # type: ignore[attr-defined]
        while not store.get(sids[0]).busy:
            time.sleep(0.01)
        again = send(0)
        assert again.status_code == 409 and "one message at a time" in again.json()["detail"]
        replies = [first, pool.submit(send, 1)]
        assert [r.result().status_code for r in replies] == [200, 200]
        assert user.calls == [("opening", 2), ("respond", 2)]
        health = client.get("/healthz").json()
        assert health["batches"] == 2 and health["batched_requests"] == 4 and health["sessions"] == 2
    # Batching changes nothing a session says (greedy decoding, left padding): same as alone.
    with client_for(CountingUser(simulator), batch_window_ms=0) as alone:
        single = alone.post("/v1/sessions", json=session_body("chat-1")).json()
        assert single["message"] == opened[1].json()["message"]


def test_reasoning_is_exposed_only_when_asked(simulator: UserSimulator) -> None:
    with client_for(simulator, expose_reasoning=True) as client:
        opened = client.post("/v1/sessions", json=session_body("shop-1")).json()
        assert set(opened) == {"session_id", "message", "ended", "reasoning"}
        turns = client.get(f"/v1/sessions/{opened['session_id']}").json()["turns"]
        assert turns[0]["reasoning"] == opened["reasoning"] and opened["reasoning"]
        info = client.get("/v1/info").json()
        assert info["expose_reasoning"] is True
    with client_for(simulator) as client:
        hidden = client.post("/v1/sessions", json=session_body("shop-1"))
        assert hidden.json()["message"] == opened["message"]  # same simulator, same greedy turn
        assert opened["reasoning"] not in hidden.text
        assert client.get("/v1/info").json()["expose_reasoning"] is False


def test_errors_name_what_is_wrong(simulator: UserSimulator) -> None:
    now = [0.0]
    settings = ServeSettings(model="tiny", batch_window_ms=0, session_ttl_s=60, max_sessions=2)
    app = create_app(simulator, settings, clock=lambda: now[0])
    with TestClient(app) as client:
        missing = client.post("/v1/sessions/nope/messages", json={"message": "hi"})
        assert missing.status_code == 404 and "unknown or has expired" in missing.json()["detail"]
        assert client.get("/v1/sessions/nope").status_code == 404

        bad = client.post("/v1/sessions", json={"domain": "shopping", "goal": {"slots": {}}, "colour": "red"})
        assert bad.status_code == 422
        locs = {tuple(e["loc"]) for e in bad.json()["detail"]}
        assert ("body", "goal", "text") in locs and ("body", "colour") in locs
        private = client.post("/v1/sessions", json={"domain": "x", "goal": {"text": "t", "private": ["pin"]}})
        assert private.status_code == 422 and "pin" in private.text

        sid = client.post("/v1/sessions", json=session_body("chat-1")).json()["session_id"]
        for body in ({}, {"message": ""}, {"mesage": "hi"}):
            r = client.post(f"/v1/sessions/{sid}/messages", json=body)
            assert r.status_code == 422, body
            assert any(e["loc"][:2] in (["body", "message"], ["body", "mesage"]) for e in r.json()["detail"])
        now[0] += 61  # idle past the TTL
        expired = client.post(f"/v1/sessions/{sid}/messages", json={"message": "hi"})
        assert expired.status_code == 404 and "60 s" in expired.json()["detail"]

        first, second, third = (client.post("/v1/sessions", json=session_body(c)).json()["session_id"]
                                for c in ("chat-1", "chat-2", "shop-1"))
        assert client.get(f"/v1/sessions/{first}").status_code == 404  # least recently used, beyond 2
        assert client.get(f"/v1/sessions/{second}").status_code == 200
        assert client.get(f"/v1/sessions/{third}").status_code == 200

        info = client.get("/v1/info").json()
        assert info["model"] == "tiny" and info["kind"] == "full"
        assert info["turn_format"]["version"] == "mimesis-turn-v1"
        assert info["generation"]["max_new_tokens"] == 32 and info["batching"]["window_ms"] == 0


def test_cli_help_and_bad_model() -> None:
    from mimesis_rl.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "--expose-reasoning" in result.output
    result = runner.invoke(app, ["serve", "--model", "/no/such/simulator"])
    assert result.exit_code == 1 and "no such folder" in result.output


def test_load_app_and_the_default_model(folder: Path) -> None:
    """`mimesis serve` = `load_app` + uvicorn; its default model is params.yaml `serve.model`."""
    project = ServeSettings.from_section(load_params(REPO / "params.yaml")["serve"])
    assert project.model == "models:/mimesis-simulator@candidate" and not project.expose_reasoning
    with TestClient(load_app(ServeSettings(model=str(folder), max_batch=4), device="cpu")) as client:
        info = client.get("/v1/info").json()
        assert info["model"] == str(folder) and info["kind"] == "full" and info["batching"]["max_batch"] == 4
        opened = client.post("/v1/sessions", json=session_body("chat-1"))
        assert opened.status_code == 201 and set(opened.json()) == {"session_id", "message", "ended"}
