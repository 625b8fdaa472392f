"""The `llm` reasoning backend against a real local HTTP server that speaks the OpenAI chat protocol."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mimesis_rl.behavior.openai_client import ChatClient, ChatClientSettings, EndpointError
from mimesis_rl.behavior.reasoning import TemplateRationalizer, repetition_problem
from mimesis_rl.behavior.reasoning.config import RationalizeSettings, build_rationalizer
from mimesis_rl.behavior.reasoning.llm import LLMRationalizer
from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.data.schema import Conversation

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reasoning" / "conversations.jsonl"
MESSAGE_LINE = re.compile(r'^The user\'s message: "(.*)"$', re.MULTILINE)


class ChatServer:
    """A small chat-completions server: `mode` decides what it answers; every request is recorded."""

    def __init__(self) -> None:
        self.mode = "think"
        self.fail_first = 0
        self.delay_s = 0.0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    failing = server.fail_first > 0
                    server.fail_first -= failing
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "not found"})
                if server.delay_s:
                    time.sleep(server.delay_s)
                if failing:
                    return self._send(503, {"error": "warming up"})
                if server.mode == "bad_request":
                    return self._send(400, {"error": "unknown model"})
                if server.mode == "garbage":
                    return self._send(200, {"id": "x"})
                message = MESSAGE_LINE.search(body["messages"][-1]["content"]).group(1)
                if server.mode == "echo":
                    content = message
                else:
                    words = len(message.split())
                    content = (f"<think>I keep my reply to {words} words because I want them to get to the "
                               f"point; the {body['model']} in me is impatient.</think>")
                choice = {"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": content}}
                return self._send(200, {"id": "chatcmpl-1", "object": "chat.completion",
                                        "model": body["model"], "choices": [choice]})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    srv = ChatServer()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def conversations() -> list[Conversation]:
    return [c for c in read_conversations(FIXTURE) if c.conversation_id in ("hotel-fx-3", "reasons-fx-6")]


def user_turns(conversations: list[Conversation]) -> int:
    return sum(1 for c in conversations for t in c.turns if t.role == "user")


def llm(url: str, **client_kwargs: Any) -> LLMRationalizer:
    config = ChatClientSettings(base_url=url, model="tiny-thinker", api_key="test-key", timeout_s=5,
                              max_retries=2, backoff_s=0.01, **client_kwargs)
    return LLMRationalizer(ChatClient(config), fallback=TemplateRationalizer(seed=0), concurrency=3)


def test_traces_come_from_the_endpoint(server, conversations):
    rationalizer = llm(server.url)
    out = rationalizer.rationalize(conversations)
    turns = user_turns(conversations)
    assert rationalizer.stats.written == turns and rationalizer.stats.fallback_total == 0
    assert len(server.requests) == turns
    for conv in out:
        for turn in conv.turns:
            if turn.role == "user":
                assert turn.reasoning.startswith(f"I keep my reply to {len(turn.content.split())} words")
                assert "<think>" not in turn.reasoning
    body = server.requests[0]
    assert body["model"] == "tiny-thinker" and body["max_tokens"] == 120
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert all(h["Authorization"] == "Bearer test-key" for h in server.headers)


def test_echoing_endpoint_falls_back_to_template(server, conversations):
    server.mode = "echo"
    rationalizer = llm(server.url)
    out = rationalizer.rationalize(conversations)
    assert rationalizer.stats.fallbacks == {"repeats_message": user_turns(conversations)}
    expected = TemplateRationalizer(seed=0).rationalize(conversations)
    assert [t.reasoning for c in out for t in c.turns] == [t.reasoning for c in expected for t in c.turns]
    for conv in out:
        for turn in conv.turns:
            if turn.role == "user":
                assert repetition_problem(turn.reasoning, turn.content) is None


def test_transient_failures_are_retried(server, conversations):
    server.fail_first = 2
    rationalizer = llm(server.url)
    rationalizer.rationalize(conversations[:1])
    assert rationalizer.stats.written == user_turns(conversations[:1])
    assert len(server.requests) == user_turns(conversations[:1]) + 2


def test_endpoint_down_is_a_clear_error(conversations):
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rationalizer = llm(f"http://127.0.0.1:{port}")
    with pytest.raises(EndpointError) as err:
        rationalizer.rationalize(conversations[:1])
    text = str(err.value)
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in text
    assert "unreachable" in text and "gave up after 3 attempts" in text
    assert "hotel-fx-3" in text and "turn 0" in text


def test_timeouts_are_retried_then_reported(server, conversations):
    server.delay_s = 0.5
    client = ChatClient(ChatClientSettings(base_url=server.url, model="m", timeout_s=0.1, max_retries=1,
                                         backoff_s=0.01))
    with pytest.raises(EndpointError, match=r"timed out after 0.1s .*gave up after 2 attempts"):
        client.chat([{"role": "user", "content": 'The user\'s message: "hi"'}])
    assert len(server.requests) == 2


def test_client_errors_are_not_retried(server):
    server.mode = "bad_request"
    client = ChatClient(ChatClientSettings(base_url=server.url, model="m", backoff_s=0.01))
    with pytest.raises(EndpointError, match="HTTP 400"):
        client.chat([{"role": "user", "content": "x"}])
    assert len(server.requests) == 1


def test_malformed_completion_is_reported(server):
    server.mode = "garbage"
    client = ChatClient(ChatClientSettings(base_url=server.url, model="m"))
    with pytest.raises(EndpointError, match=r"no choices\[0\]\.message\.content"):
        client.chat([{"role": "user", "content": "x"}])


def test_config_from_params_and_environment(server, conversations, monkeypatch):
    monkeypatch.delenv("MIMESIS_TEST_LLM_URL", raising=False)
    params = {"rationalize": {"backend": "llm", "llm": {"base_url_env": "MIMESIS_TEST_LLM_URL",
                                                        "model": "tiny-thinker", "concurrency": 2}}}
    config = RationalizeSettings.from_params(params)
    with pytest.raises(EndpointError, match=r"no base_url configured; set \$MIMESIS_TEST_LLM_URL"):
        build_rationalizer(config)
    monkeypatch.setenv("MIMESIS_TEST_LLM_URL", server.url.removesuffix("/v1"))
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    rationalizer = build_rationalizer(config, seed=0)
    assert isinstance(rationalizer, LLMRationalizer)
    rationalizer.rationalize(conversations[:1])
    assert rationalizer.stats.written == user_turns(conversations[:1])
    assert server.headers[0]["Authorization"] == "Bearer from-env"
