"""The simulator's HTTP API against a real tiny simulator: session lifecycle, micro-batching
(counted on the real simulator's calls), hidden reasoning and private slots, the OpenAI-compatible
endpoint driven by the real `openai` client over a real uvicorn server, keys and limits, metrics
and access logs, more than twenty kinds of bad request, and the CLI."""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
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
from mimesis_rl.serve.local import LocalServer
from mimesis_rl.simulator.format import FORMAT_VERSION, OPENING_CUE
from mimesis_rl.simulator.runtime import UserSimulator
from mimesis_rl.simulator.sft import SFTSettings, train_sft

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY, OTHER_KEY = "test-key-0123456789abcdef", "other-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
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
        "curve": {"enabled": True, "fractions": [1.0], "decision_prompts": 2, "env_dialogues": 0},
    })
    metrics = train_sft(settings, seed=0)
    # the learning curve of a full fine-tune: the model itself as the user (no adapter to activate)
    assert [p["step"] for p in metrics["curve"]] == [100]
    return root / "simulator"


@pytest.fixture(scope="module")
def simulator(folder: Path) -> UserSimulator:
    return UserSimulator.load(folder, device="cpu", batch_size=8)


class LeavesAfter:
    """The real simulator's words, but *when* the user leaves is scripted: at the `turns`-th agent
    message, never before. The tiny fixture model's outputs are often rejected by the turn parser
    (which ends a session at once), and these tests are about the server, not about that model."""

    def __init__(self, simulator: UserSimulator, turns: int) -> None:
        self.simulator, self.turns = simulator, turns
        self.seen: dict[int, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.simulator, name)

    def opening(self, sessions: list[Any]) -> list[Any]:
        replies = self.simulator.opening(sessions)
        for reply in replies:
            reply.ended = False
        return replies

    def respond(self, sessions: list[Any], messages: list[str]) -> list[Any]:
        replies = self.simulator.respond(sessions, messages)
        for session, reply in zip(sessions, replies, strict=True):
            self.seen[id(session)] = self.seen.get(id(session), 0) + 1
            reply.ended = self.seen[id(session)] >= self.turns
        return replies

    def reply(self, prompts: list[Any], seed: int | None = None) -> list[Any]:
        turns = self.simulator.reply(prompts, seed)
        agent_turns = [sum(m["role"] == "user" and m["content"] != OPENING_CUE for m in p) for p in prompts]
        return [replace(t, ended=n >= self.turns, error=None)
                for t, n in zip(turns, agent_turns, strict=True)]


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

    def reply(self, prompts: list[Any], seed: int | None = None) -> list[Any]:
        self.calls.append(("reply", len(prompts)))
        return self.simulator.reply(prompts, seed)


def settings_for(**settings: Any) -> ServeSettings:
    return ServeSettings(**{"model": "tiny-test-simulator", "api_keys": (KEY,), **settings})


def client_for(user: Any, **settings: Any) -> TestClient:
    return TestClient(create_app(user, settings_for(**settings), environ={}), headers=AUTH)


def test_session_lifecycle_with_hidden_reasoning(simulator: UserSimulator) -> None:
    user = CountingUser(LeavesAfter(simulator, 3))
    with client_for(user, batch_window_ms=0) as client:
        opened = client.post("/v1/sessions", json=session_body("shop-1"))
        assert opened.status_code == 201, opened.text
        body = opened.json()
        assert set(body) == {"session_id", "message", "ended"}  # no reasoning by default
        assert not body["ended"]
        sid = body["session_id"]

        replies = []
        for line in agent_lines("shop-1") * 3:
            reply = client.post(f"/v1/sessions/{sid}/messages", json={"message": line})
            assert reply.status_code == 200, reply.text
            assert set(reply.json()) == {"message", "ended"}
            assert "<think>" not in reply.json()["message"]
            replies.append(reply.json())
            if reply.json()["ended"]:
                break
        assert [r["ended"] for r in replies] == [False, False, True]
        gone = client.post(f"/v1/sessions/{sid}/messages", json={"message": "Still there?"})
        assert gone.status_code == 409 and "has ended" in gone.json()["detail"]
        assert gone.json()["error"]["code"] == "session_ended"

        transcript = client.get(f"/v1/sessions/{sid}").json()
        conversation = CONVERSATIONS_BY_ID["shop-1"]
        assert transcript["ended"] and transcript["domain"] == conversation.domain and transcript["seed"] == 3
        assert transcript["goal"]["private"] == conversation.goal.private
        for slot, value in conversation.goal.slots.items():  # private values stay on the server
            shown = transcript["goal"]["slots"][slot]
            assert shown == ("[private]" if slot in conversation.goal.private else value)
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
    user = CountingUser(LeavesAfter(simulator, 5))
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
        again = send(0)  # a second message to the same session while the first is answered
        assert again.status_code == 409 and "one message at a time" in again.json()["detail"]
        replies = [first, pool.submit(send, 1)]
        assert [r.result().status_code for r in replies] == [200, 200]
        assert user.calls == [("opening", 2), ("respond", 2)]
        health = client.get("/healthz").json()
        assert health["batches"] == 2 and health["batched_requests"] == 4 and health["sessions"] == 2

        # Stateless chat requests batch too: two agents' requests, one `reply` call.
        chats = [{"model": "tiny-test-simulator", "metadata": {"domain": "shopping"},
                  "messages": [{"role": "system", "content": "Buy a jacket."}]}] * 2
        answered = list(pool.map(lambda b: client.post("/v1/chat/completions", json=b), chats))
        assert [r.status_code for r in answered] == [200, 200]
        assert user.calls[-1] == ("reply", 2)
    # Batching changes nothing a session says (greedy decoding, left padding): same as alone.
    with client_for(CountingUser(LeavesAfter(simulator, 5)), batch_window_ms=0) as alone:
        single = alone.post("/v1/sessions", json=session_body(ids[1])).json()
        assert single["message"] == opened[1].json()["message"]


def test_reasoning_and_private_slots_are_exposed_only_when_asked(simulator: UserSimulator) -> None:
    """shop-1's goal has a private budget of 120."""
    with client_for(simulator, expose_reasoning=True, expose_private=True) as client:
        opened = client.post("/v1/sessions", json=session_body("shop-1")).json()
        assert set(opened) == {"session_id", "message", "ended", "reasoning"}
        transcript = client.get(f"/v1/sessions/{opened['session_id']}").json()
        assert transcript["turns"][0]["reasoning"] == opened["reasoning"]
        assert transcript["goal"]["slots"]["budget"] == 120
        info = client.get("/v1/info").json()
        assert info["expose_reasoning"] is True and info["expose_private"] is True
        chat = client.post("/v1/chat/completions", json={"model": "tiny-test-simulator", "messages": [
            {"role": "system", "content": "Buy a jacket."}]}).json()
        assert "reasoning" in chat["mimesis"]
    with client_for(simulator) as client:
        hidden = client.post("/v1/sessions", json=session_body("shop-1"))
        assert hidden.json()["message"] == opened["message"]  # same simulator, same greedy turn
        assert '"reasoning"' not in hidden.text
        transcript = client.get(f"/v1/sessions/{hidden.json()['session_id']}")
        assert transcript.json()["goal"]["slots"]["budget"] == "[private]"
        assert '"reasoning"' not in transcript.text
        assert client.get("/v1/info").json()["expose_reasoning"] is False
        chat = client.post("/v1/chat/completions", json={"model": "tiny-test-simulator", "messages": [
            {"role": "system", "content": "Buy a jacket."}]}).json()
        assert "reasoning" not in chat["mimesis"]


def test_an_openai_client_agent_talks_to_the_server_unchanged(simulator: UserSimulator) -> None:
    """An agent written against the `openai` package: base_url and api_key are all it changes."""
    openai = pytest.importorskip("openai")
    app = create_app(LeavesAfter(simulator, 3),
                     settings_for(model="models:/mimesis-simulator@candidate", batch_window_ms=0), environ={})
    goal = CONVERSATIONS_BY_ID["shop-1"].goal.text
    with LocalServer(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        assert [m.id for m in client.models.list()] == ["models:/mimesis-simulator@candidate"]

        messages: list[dict[str, str]] = [{"role": "system", "content": goal}]
        finish = []
        for line in agent_lines("shop-1") * 2:
            completion = client.chat.completions.create(model="models:/mimesis-simulator@candidate",
                                                        messages=messages, metadata={"domain": "shopping"})
            choice = completion.choices[0]
            assert choice.message.role == "assistant" and completion.object == "chat.completion"
            assert "<think>" not in (choice.message.content or "")
            finish.append(choice.finish_reason)
            messages.append({"role": "user", "content": choice.message.content or ""})
            if choice.finish_reason == "stop":  # the user has left
                break
            messages.append({"role": "assistant", "content": line})
        assert finish == [None, None, None, "stop"]  # "stop": the user has left

        # The stateless opening equals a session's opening for the same card (greedy decoding).
        with httpx.Client(base_url=url, headers=AUTH) as http:
            session = http.post("/v1/sessions", json={"domain": "shopping", "goal": {"text": goal}})
        assert session.json()["message"] == messages[1]["content"]

        with pytest.raises(openai.AuthenticationError, match="invalid API key"):
            openai.OpenAI(base_url=f"{url}/v1", api_key="wrong-key-0123456789", max_retries=0).models.list()
        with pytest.raises(openai.NotFoundError, match="not served here"):
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "system", "content": goal}])
        with pytest.raises(openai.UnprocessableEntityError, match="messages.1.role"):
            client.chat.completions.create(model="models:/mimesis-simulator@candidate", messages=[
                {"role": "system", "content": goal}, {"role": "user", "content": "I spoke last"}])


def test_bad_requests_get_a_clear_4xx_and_the_server_stays_up(simulator: UserSimulator,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    settings = settings_for(model="tiny", batch_window_ms=0, session_ttl_s=60, max_sessions_per_key=2,
                            max_body_bytes=4096, max_message_chars=200, max_messages=6, rate_burst=1000,
                            api_keys=(KEY, OTHER_KEY))
    app = create_app(LeavesAfter(simulator, 1), settings, clock=lambda: now[0], environ={})
    chat = {"model": "tiny", "messages": [{"role": "system", "content": "Buy a jacket."}]}
    caplog.set_level(logging.INFO, logger="mimesis_rl.serve.access")
    with TestClient(app, headers=AUTH) as client:
        ended = client.post("/v1/sessions", json=session_body("shop-1")).json()["session_id"]
        said = agent_lines("shop-1")[0]
        assert client.post(f"/v1/sessions/{ended}/messages", json={"message": said}).json()["ended"]
        sid = client.post("/v1/sessions", json=session_body("chat-1")).json()["session_id"]
        assert client.post("/v1/sessions", json=session_body("chat-2")).status_code == 429  # 2 per key

        def msgs(*pairs: tuple[str, str]) -> dict[str, Any]:
            return {"model": "tiny", "messages": [{"role": r, "content": c} for r, c in pairs]}

        no_key = {"Authorization": ""}
        cases: list[tuple[str, str, str, dict[str, Any], dict[str, str] | None, int, str]] = [
            # name, method, path, json body, headers, status, part of the message
            ("no key", "GET", "/v1/models", {}, no_key, 401, "missing API key"),
            ("wrong key", "GET", "/v1/models", {}, {"Authorization": "Bearer nope-0123456789abcdef"}, 401,
             "invalid API key"),
            ("not a bearer", "GET", "/v1/models", {}, {"Authorization": "Basic dXNlcjpwYXNz"}, 401,
             "expected `Bearer <key>`"),
            ("oversize body", "POST", "/v1/chat/completions",
             {**chat, "user": "x" * 5000}, None, 413, "4096 bytes"),
            ("unknown session", "POST", "/v1/sessions/nope/messages", {"message": "hi"}, None, 404,
             "unknown or has expired"),
            ("another key's session", "GET", f"/v1/sessions/{sid}", {},
             {"Authorization": f"Bearer {OTHER_KEY}"}, 404, "unknown or has expired"),
            ("message to an ended session", "POST", f"/v1/sessions/{ended}/messages", {"message": "hi"}, None,
             409, "has ended"),
            ("too many sessions", "POST", "/v1/sessions", session_body("chat-2"), None, 429,
             "too many open sessions"),
            ("message of the wrong type", "POST", f"/v1/sessions/{sid}/messages", {"message": 5}, None, 422,
             "message"),
            ("empty message", "POST", f"/v1/sessions/{sid}/messages", {"message": ""}, None, 422, "message"),
            ("misspelt field", "POST", f"/v1/sessions/{sid}/messages", {"mesage": "hi"}, None, 422, "mesage"),
            ("message too long", "POST", f"/v1/sessions/{sid}/messages", {"message": "x" * 201}, None, 422,
             "limit is 200"),
            ("unknown domain", "POST", "/v1/sessions", {**session_body("chat-1"), "domain": "casinos"}, None,
             422, "unknown domain 'casinos'"),
            ("private name that is no slot", "POST", "/v1/sessions",
             {"domain": "shopping", "goal": {"text": "t", "private": ["pin"]}}, None, 422, "pin"),
            ("goal without text", "POST", "/v1/sessions", {"domain": "shopping", "goal": {}}, None, 422,
             "goal.text"),
            ("unknown model", "POST", "/v1/chat/completions", {**chat, "model": "gpt-4o"}, None, 404,
             "not served here"),
            ("empty messages", "POST", "/v1/chat/completions", {**chat, "messages": []}, None, 422,
             "no messages"),
            ("messages of the wrong type", "POST", "/v1/chat/completions", {**chat, "messages": "hi"}, None,
             422, "messages"),
            ("empty content", "POST", "/v1/chat/completions", msgs(("system", "goal"), ("assistant", " ")),
             None, 422, "messages.1.content: must not be empty"),
            ("tool role", "POST", "/v1/chat/completions", msgs(("system", "goal"), ("tool", "42")), None, 422,
             "role"),
            ("system message not first", "POST", "/v1/chat/completions",
             msgs(("assistant", "Hi"), ("system", "goal")), None, 422, "may only come first"),
            ("two agent turns in a row", "POST", "/v1/chat/completions",
             msgs(("user", "hello"), ("assistant", "Hi"), ("assistant", "Hi?")), None, 422, "in a row"),
            ("user spoke last", "POST", "/v1/chat/completions", msgs(("user", "hello")), None, 422,
             "the last message is the user's"),
            ("too many messages", "POST", "/v1/chat/completions",
             msgs(*[("assistant", "a"), ("user", "u")] * 4), None, 422, "limit is 6"),
            ("streaming", "POST", "/v1/chat/completions", {**chat, "stream": True}, None, 422, "streaming"),
            ("several choices", "POST", "/v1/chat/completions", {**chat, "n": 2}, None, 422, "n=2"),
            ("tools", "POST", "/v1/chat/completions", {**chat, "tools": []}, None, 422, "tools"),
            ("unknown chat domain", "POST", "/v1/chat/completions", {**chat, "metadata": {"domain": "mars"}},
             None, 422, "metadata.domain"),
            ("persona not JSON", "POST", "/v1/chat/completions", {**chat, "metadata": {"persona": "{oops"}},
             None, 422, "metadata.persona"),
            ("wrong method", "GET", "/v1/chat/completions", {}, None, 405, "Method Not Allowed"),
        ]
        for name, method, path, body, headers, status, text in cases:
            r = client.request(method, path, json=body if method == "POST" else None, headers=headers)
            assert r.status_code == status, (name, r.status_code, r.text)
            error = r.json()["error"]
            assert text in error["message"], (name, error)
            assert r.headers["x-request-id"]
        bad_json = client.post("/v1/chat/completions", content=b"{not json", headers={"content-type":
                                                                                     "application/json"})
        assert bad_json.status_code == 422 and "JSON" in bad_json.json()["error"]["message"]
        assert len(cases) + 1 >= 20

        now[0] += 61  # idle past the TTL
        expired = client.post(f"/v1/sessions/{sid}/messages", json={"message": "hi"})
        assert expired.status_code == 404 and "60 s" in expired.json()["detail"]

        assert client.get("/healthz", headers=no_key).json()["status"] == "ok"  # open, and still up
        assert client.post("/v1/chat/completions", json=chat).status_code == 200

        metrics = client.get("/metrics", headers=no_key)
        assert metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        assert 'mimesis_requests_total{method="POST",route="/v1/chat/completions",status="200"}' in text
        assert 'mimesis_refused_requests_total{reason="missing_api_key"} 1.0' in text
        assert 'mimesis_refused_requests_total{reason="too_many_sessions"} 2.0' in text
        assert 'mimesis_batch_size_count{kind="respond"}' in text
        assert "mimesis_request_seconds_bucket" in text and "mimesis_active_sessions" in text
        assert "mimesis_rejected_turns_total" in text and "mimesis_simulator_refusals_total" in text

    logs = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mimesis_rl.serve.access"]
    assert {"request_id", "key", "method", "route", "status", "ms"} <= set(logs[0])
    assert {e["status"] for e in logs} >= {200, 201, 401, 404, 409, 413, 422, 429}
    assert any(e["route"] == "/v1/sessions/{session_id}/messages" and e["session"] for e in logs)
    joined = "\n".join(r.getMessage() for r in caplog.records)
    assert said not in joined and KEY not in joined


def test_rate_limit_per_key_with_retry_after(simulator: UserSimulator) -> None:
    frozen = [0.0]  # the clock does not move: the bucket never refills during the test
    app = create_app(simulator, settings_for(rate_burst=3, rate_per_s=0.5, api_keys=(KEY, OTHER_KEY)),
                     clock=lambda: frozen[0], environ={})
    with TestClient(app, headers=AUTH) as client:
        assert [client.get("/v1/models").status_code for _ in range(3)] == [200, 200, 200]
        limited = client.get("/v1/models")
        assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
        assert "rate limit" in limited.json()["error"]["message"]
        other = client.get("/v1/models", headers={"Authorization": f"Bearer {OTHER_KEY}"})
        assert other.status_code == 200  # limits are per key
        frozen[0] += 2.0
        assert client.get("/v1/models").status_code == 200


def test_timeout_ends_the_session_with_a_504(simulator: UserSimulator) -> None:
    """A request that waits past `request_timeout_s` gets a 504; the timeout is hit deterministically by
    a batch window far longer than it (the lone request waits in the batcher)."""
    slow = settings_for(batch_window_ms=60_000, max_batch=2, request_timeout_s=0.2)
    app = create_app(simulator, slow, environ={})
    with TestClient(app, headers=AUTH) as client:
        r = client.post("/v1/chat/completions", json={"model": "tiny-test-simulator", "messages": [
            {"role": "system", "content": "Buy a jacket."}]})
        assert r.status_code == 504 and "request_timeout_s" in r.json()["error"]["message"]
        assert 'mimesis_timeouts_total 1.0' in client.get("/metrics").text
        assert client.get("/healthz").status_code == 200


def test_adapters_drive_the_server(simulator: UserSimulator, folder: Path) -> None:
    """The verl interaction (stand-in base when verl is absent) and the TRL rollout_func, over HTTP."""
    import asyncio

    from trl import GRPOConfig

    from mimesis_rl.models.loading import load_base
    from mimesis_rl.serve.adapters import SimulatorClient, SimulatorError
    from mimesis_rl.serve.adapters.trl import make_rollout_func
    from mimesis_rl.serve.adapters.verl import MimesisInteraction

    app = create_app(LeavesAfter(simulator, 3), settings_for(batch_window_ms=5), environ={})
    goal = {"text": CONVERSATIONS_BY_ID["shop-1"].goal.text, "domain": "shopping"}
    with LocalServer(app) as url:
        interaction = MimesisInteraction({"name": "mimesis_user", "base_url": url, "api_key": KEY})

        async def verl_episode() -> list[tuple[bool, str, float, dict[str, Any]]]:
            iid = await interaction.start_interaction(goal=goal)
            messages = [{"role": "system", "content": "You are a shop assistant."},
                        {"role": "user", "content": await interaction.opening(iid)}]
            steps = []
            for line in agent_lines("shop-1") * 3:
                messages.append({"role": "assistant", "content": line})
                step = await interaction.generate_response(iid, messages)
                steps.append(step)
                if step[0]:
                    break
                messages.append({"role": "user", "content": step[1]})
            assert await interaction.calculate_score(iid) == 0.0
            await interaction.finalize_interaction(iid)
            return steps

        steps = asyncio.run(verl_episode())
        assert steps[-1][0] is True and steps[-1][3] == {"user_left": True}  # the user left: terminate
        assert all(isinstance(s[1], str) and s[2] == 0.0 for s in steps)
        with pytest.raises(SimulatorError, match="401"):
            SimulatorClient(url, api_key="bad-key-0123456789abcdef").models()

        # TRL: a real tiny causal LM as the agent, the served simulator as the user.
        model, tok = load_base(folder / "model", device="cpu", padding_side="left")
        args = GRPOConfig(output_dir="unused", max_completion_length=200, temperature=1.0, use_cpu=True,
                          report_to=[])
        trainer = type("TrainerView", (), {"model": model, "processing_class": tok, "args": args})()
        rollout = make_rollout_func(SimulatorClient(url, api_key=KEY), goal_for=lambda p: goal, max_turns=4,
                                    max_new_tokens=12)
        prompts = [[{"role": "system", "content": "You are a shop assistant."}]] * 3
        out = rollout(prompts, trainer)
    assert len(out["completion_ids"]) == 3 and len(out["prompt_ids"]) == 3
    for ids, logprobs, mask, turns in zip(out["completion_ids"], out["logprobs"], out["env_mask"],
                                          out["agent_turns"], strict=True):
        assert len(ids) == len(logprobs) == len(mask) and 1 <= turns <= 4
        assert all(lp <= 0 for lp in logprobs) and mask[0] == 1
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if m == 0)
    opening = out["user_messages"][0][0]
    assert opening in tok.decode(out["prompt_ids"][0])  # the user's opening is in the prompt
    for ids, mask, users, left in zip(out["completion_ids"], out["env_mask"], out["user_messages"],
                                      out["user_left"], strict=True):
        env_text = tok.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
        staying = users[1:-1] if left else users[1:]
        assert all(u in env_text for u in staying)  # the user's replies are the env tokens


def test_cli_help_auth_and_bad_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mimesis_rl.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "--expose-reasoning" in result.output and "--no-auth" in result.output
    result = runner.invoke(app, ["serve", "--no-auth", "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "refused" in result.output
    monkeypatch.delenv("MIMESIS_API_KEYS", raising=False)
    result = runner.invoke(app, ["serve", "--model", "/no/such/simulator"])
    assert result.exit_code == 1 and "no API keys" in result.output
    result = runner.invoke(app, ["serve", "--no-auth", "--model", "/no/such/simulator"])
    assert result.exit_code == 1 and "no such folder" in result.output
    keys = tmp_path / "keys.txt"
    keys.write_text("# team A\nkey-a-0123456789abcdef\n")
    result = runner.invoke(app, ["serve", "--keys-file", str(keys), "--model", "/no/such/simulator"])
    assert result.exit_code == 1 and "no such folder" in result.output  # keys found: on to the model


def test_load_app_and_the_default_model(folder: Path) -> None:
    """`mimesis serve` = `load_app` + uvicorn; its default model is params.yaml `serve.model`."""
    project = ServeSettings.from_section(load_params(REPO / "params.yaml")["serve"])
    assert project.model == "models:/mimesis-simulator@candidate" and not project.expose_reasoning
    assert project.auth and not project.expose_private
    app = load_app(ServeSettings(model=str(folder), max_batch=4, api_keys=(KEY,)), device="cpu", environ={})
    with TestClient(app, headers=AUTH) as client:
        info = client.get("/v1/info").json()
        assert info["model"] == str(folder) and info["card_style"] == "simulator"
        assert info["batching"]["max_batch"] == 4 and info["auth"] is True
        assert info["turn_format"]["version"] == FORMAT_VERSION
        assert info["sampling"]["max_new_tokens"] == 32
        assert "shopping" in info["domains"] and "chitchat" in info["domains"]
        opened = client.post("/v1/sessions", json=session_body("chat-1"))
        assert opened.status_code == 201 and set(opened.json()) == {"session_id", "message", "ended"}
    with pytest.raises(ValueError, match="no API keys"):
        load_app(ServeSettings(model=str(folder)), device="cpu", environ={})


def test_trl_grpo_step_against_the_server(simulator: UserSimulator, folder: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One real GRPOTrainer step whose rollouts are dialogues with the served simulator."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from mimesis_rl.models.loading import load_base
    from mimesis_rl.serve.adapters import SimulatorClient
    from mimesis_rl.serve.adapters.trl import make_rollout_func

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = load_base(folder / "model", device="cpu", padding_side="left")
    seen: dict[str, Any] = {}

    def stayed(completions: list, user_left: list[bool], agent_turns: list[int], **_: Any) -> list[float]:
        seen.setdefault("agent_turns", []).extend(agent_turns)
        return [float(not left) + 0.01 * len(c[0]["content"]) for c, left in zip(completions, user_left,
                                                                                   strict=True)]

    data = Dataset.from_list([{"prompt": [{"role": "system", "content": f"You are a shop assistant ({i})."}]}
                              for i in range(2)])
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
                      max_steps=1, max_completion_length=96, learning_rate=1e-3, use_cpu=True, report_to=[],
                      logging_steps=1, save_strategy="no", temperature=1.0, beta=0.0, seed=0)
    # A full batch (4 dialogues) is sent at once; the long window only bounds a straggler's wait.
    app = create_app(LeavesAfter(simulator, 2), settings_for(batch_window_ms=5000, max_batch=4), environ={})
    with LocalServer(app) as url:
        rollout = make_rollout_func(SimulatorClient(url, api_key=KEY), max_turns=3, max_new_tokens=8)
        trainer = GRPOTrainer(model=model, reward_funcs=stayed, args=args, train_dataset=data,
                              processing_class=tok, rollout_func=rollout)
        before = [p.detach().clone() for p in model.parameters()]
        trainer.train()
        batches = app.state.batcher.batches
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert seen["agent_turns"] == [2, 2, 2, 2]  # the user left after the agent's second turn
    assert batches == 3  # the 4 dialogues' openings, first and second replies: one simulator call each


# -- one bad request never hurts another (issue 28) -------------------------------------------------

POISON = "POISON-PILL"


class Poisoner(LeavesAfter):
    """The real simulator, with POISON in an agent message turned into a lone surrogate on the way in:
    a text the real tokenizer cannot take, failing the real batched call half-way through."""

    def respond(self, sessions: list[Any], messages: list[str]) -> list[Any]:
        return super().respond(sessions, [m.replace(POISON, "\ud800") for m in messages])


def test_a_poison_pill_fails_alone_and_the_batch_is_answered(simulator: UserSimulator) -> None:
    user = CountingUser(Poisoner(simulator, 10))
    ids = ["shop-1", "chat-1", "shop-1"]
    # Three requests fill a batch at once; a later lone request waits out the (short) window.
    with client_for(user, batch_window_ms=1000, max_batch=3) as client, ThreadPoolExecutor(3) as pool:
        opened = list(pool.map(lambda c: client.post("/v1/sessions", json=session_body(c)), ids))
        sids = [r.json()["session_id"] for r in opened]
        lines = [agent_lines(ids[0])[0], POISON + " " + agent_lines(ids[1])[0], agent_lines(ids[2])[0]]
        answers = list(pool.map(lambda i: client.post(f"/v1/sessions/{sids[i]}/messages",
                                                      json={"message": lines[i]}), range(3)))
        assert [a.status_code for a in answers] == [200, 500, 200], [a.text for a in answers]
        assert answers[1].json()["error"]["code"] == "simulator_error"
        assert user.calls[:2] == [("opening", 3), ("respond", 3)]  # the shared call failed, then halves
        store = client.app.state.store  # type: ignore[attr-defined]
        for i in (0, 2):  # the failed call was rolled back: the agent's message is in the session once
            said = [m["content"] for m in store.get(sids[i]).handle.messages]
            assert said.count(lines[i]) == 1, said
            again = client.post(f"/v1/sessions/{sids[i]}/messages", json={"message": "And the price?"})
            assert again.status_code == 200, again.text
        assert client.post(f"/v1/sessions/{sids[1]}/messages", json={"message": "hi"}).status_code == 409


def test_a_valid_request_concurrent_with_bad_ones_succeeds(simulator: UserSimulator) -> None:
    good = {"model": "tiny-test-simulator", "metadata": {"domain": "shopping"},
            "messages": [{"role": "system", "content": "Buy a jacket."}]}
    bad = ['{"model": "tiny-test-simulator", "messages": [{"role": "system", "content": "x\\ud800"}]}',
           '{"model": "tiny-test-simulator", "messages": [{"role": "system", "content": "x\\u0000"}]}',
           '{"model": "tiny-test-simulator", "seed": 1e400, "messages": []}']
    with client_for(LeavesAfter(simulator, 3), batch_window_ms=300, max_batch=8) as client, \
            ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(client.post, "/v1/chat/completions", content=b,
                               headers={"Content-Type": "application/json"}) for b in bad]
        answer = client.post("/v1/chat/completions", json=good)
        assert answer.status_code == 200, answer.text
        assert [f.result().status_code for f in futures] == [422, 422, 422]


def test_random_chat_bodies_never_get_a_500_from_the_real_simulator(simulator: UserSimulator) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    text = st.text(st.characters(codec=None, exclude_categories=()), max_size=10) | st.sampled_from(
        ["Buy a jacket.", "How much?", "\ud800", "", "<think>", "</think>"])
    role = st.sampled_from(["system", "user", "assistant"])
    message = st.fixed_dictionaries({"role": role, "content": text})
    domain = st.fixed_dictionaries({"domain": st.sampled_from(["shopping", "chitchat", "?"])})
    body = st.fixed_dictionaries(
        {"model": st.just("tiny-test-simulator"), "messages": st.lists(message, min_size=1, max_size=4)},
        optional={"metadata": domain, "seed": st.integers(-5, 2**40)})

    with client_for(LeavesAfter(simulator, 3), batch_window_ms=0) as client:
        codes: list[int] = []

        @settings(max_examples=20)
        @given(body)
        def check(chat: dict[str, Any]) -> None:
            answer = client.post("/v1/chat/completions", content=json.dumps(chat),
                                 headers={"Content-Type": "application/json"})
            codes.append(answer.status_code)
            assert answer.status_code < 500, (chat, answer.text)

        check()
        # a valid body was generated (the model answered), not only refused ones
        assert 200 in codes or client.post("/v1/chat/completions", json={
            "model": "tiny-test-simulator", "messages": [{"role": "system", "content": "Buy a jacket."}]},
        ).status_code == 200
