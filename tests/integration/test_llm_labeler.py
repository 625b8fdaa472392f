"""The llm labeler against a real OpenAI-compatible HTTP server started on 127.0.0.1 inside the test.

The server speaks `/v1/chat/completions`: it parses the request, reads the turn the prompt asks to
label and answers canned JSON built from it (a question -> follow_up_probe, a leading "no" -> refusal,
plus a name outside the taxonomy that the labeler must drop). It can fail on purpose (503 first,
garbage answers) to exercise retries and errors.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mimesis_rl.behavior.labelers import LabelSettings, build_labeler
from mimesis_rl.behavior.labelers.llm import LLMAnswerError, LLMLabeler, parse_answer
from mimesis_rl.behavior.openai_client import ChatClient, ChatClientSettings, EndpointError
from mimesis_rl.cli import app
from mimesis_rl.data.schema import Conversation, Turn

pytestmark = pytest.mark.integration


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        self.fail_next = 0  # answer 503 to this many requests first
        self.garbage = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: dict[str, Any] | str) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": "not found"})
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        self.server.headers_seen.append(dict(self.headers))
        if self.server.fail_next > 0:
            self.server.fail_next -= 1
            self._send(503, {"error": "warming up"})
            return
        prompt = body["messages"][-1]["content"]
        turn = prompt.split("USER (label this):", 1)[1].strip()
        patterns: dict[str, float] = {"sarcasm": 0.9}  # not in the taxonomy: must be dropped
        if "?" in turn:
            patterns["follow_up_probe"] = 0.9
        if turn.lower().startswith("no"):
            patterns["refusal"] = 0.8
        content = (
            "sorry, I cannot do JSON today"
            if self.server.garbage
            else ("```json\n" + json.dumps({"patterns": patterns}) + "\n```")
        )
        self._send(
            200,
            {
                "id": "cmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
            },
        )


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    srv = FakeOpenAI()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _labeler(server: FakeOpenAI, **kw: Any) -> LLMLabeler:
    config = ChatClientSettings(
        base_url=server.base_url,
        model="tiny-judge",
        api_key="sk-test",
        timeout_s=5,
        max_retries=2,
        backoff_s=0.01,
    )
    return LLMLabeler(ChatClient(config), concurrency=2, **kw)


CONV = Conversation(
    conversation_id="c1",
    source="s",
    domain="shop",
    turns=[
        Turn(role="assistant", content="Would you like the extended warranty?"),
        Turn(role="user", content="No thanks."),
        Turn(role="assistant", content="It covers accidental damage."),
        Turn(role="user", content="What does it cost?"),
    ],
)


def test_labels_conversations_through_the_protocol(server: FakeOpenAI) -> None:
    labeler = _labeler(server)
    [labels] = labeler.label([CONV])
    assert [t.patterns for t in labels] == [("refusal",), ("follow_up_probe",)]
    assert labels[0].probabilities["refusal"] == pytest.approx(0.8)
    assert labeler.stats["unknown_names"] == 2 and labeler.stats["turns"] == 2
    # turns are sent concurrently, so the requests may arrive in either order
    first_turn = "USER (label this): No thanks."
    (request,) = [r for r in server.requests if first_turn in r["messages"][1]["content"]]
    assert request["model"] == "tiny-judge" and request["temperature"] == 0.0
    assert request["messages"][0]["role"] == "system" and "negotiation" in request["messages"][0]["content"]
    assert "AGENT: Would you like the extended warranty?" in request["messages"][1]["content"]
    assert server.headers_seen[0]["Authorization"] == "Bearer sk-test"
    labeler.close()


def test_retries_a_failing_endpoint(server: FakeOpenAI) -> None:
    server.fail_next = 2  # two 503s, then answers: within max_retries=2
    labeler = _labeler(server)
    contexts = [c for _, c in _contexts()]
    assert labeler.predict(contexts)[0].sum() >= 1
    assert len(server.requests) == 2 + len(contexts)


def _contexts() -> list:
    from mimesis_rl.behavior.context import user_turn_contexts

    return user_turn_contexts(CONV)


def test_unusable_answers_raise_naming_the_turn(server: FakeOpenAI) -> None:
    server.garbage = True
    labeler = _labeler(server)
    with pytest.raises(LLMAnswerError, match=r"c1 turn 1: no JSON object"):
        labeler.label([CONV])
    assert labeler.stats["bad_answers"] >= 2


def test_down_endpoint_fails_clearly() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = ChatClientSettings(
        base_url=f"http://127.0.0.1:{port}", model="m", timeout_s=1, max_retries=1, backoff_s=0.01
    )
    labeler = LLMLabeler(ChatClient(config), concurrency=1)
    with pytest.raises(
        EndpointError, match=rf"c1 turn 1: http://127.0.0.1:{port}/v1/chat/completions: unreachable"
    ):
        labeler.label([CONV])


def test_parse_answer_accepts_lists_and_rejects_junk() -> None:
    assert parse_answer('{"patterns": ["refusal"]}') == ({"refusal": 1.0}, [])
    assert parse_answer('Sure: {"patterns": {"criticism": 1.7}}')[0] == {"criticism": 1.0}
    with pytest.raises(LLMAnswerError, match="not a number"):
        parse_answer('{"patterns": {"refusal": "high"}}')
    with pytest.raises(LLMAnswerError, match="expected"):
        parse_answer('{"labels": []}')


def test_configured_from_params_and_env_and_used_by_the_cli(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixtures_dir: Path
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    labeler = build_labeler("llm", LabelSettings(llm={"max_retries": 0, "concurrency": 2}))
    assert labeler.predict([c for _, c in _contexts()]).sum() == 2
    assert server.requests[-1]["model"] == "env-model"
    labeler.close()

    params = tmp_path / "params.yaml"  # fast retries, so the down-endpoint case takes a fraction of a second
    params.write_text(
        "profile: demo\nprofiles: {demo: {}}\nlabel:\n  llm: {max_retries: 1, backoff_s: 0.01, "
        "timeout_s: 2, concurrency: 2}\n"
    )
    out = tmp_path / "labeled.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "label",
            "--input",
            str(fixtures_dir / "label" / "unseen.jsonl"),
            "--output",
            str(out),
            "--backend",
            "llm",
            "--params",
            str(params),
        ],
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    asked = records[1]["turns"][3]
    assert asked["content"].endswith("?") and "follow_up_probe" in asked["patterns"]

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # discard port: down
    down = tmp_path / "down.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "label",
            "--input",
            str(fixtures_dir / "label" / "unseen.jsonl"),
            "--output",
            str(down),
            "--backend",
            "llm",
            "--params",
            str(params),
        ],
    )
    assert result.exit_code == 1 and "unreachable" in result.output
    assert not down.exists()

    monkeypatch.delenv("OPENAI_BASE_URL")
    result = CliRunner().invoke(
        app,
        [
            "label",
            "--input",
            str(fixtures_dir / "label" / "unseen.jsonl"),
            "--output",
            str(down),
            "--backend",
            "llm",
            "--params",
            str(params),
        ],
    )
    assert result.exit_code == 1 and "OPENAI_BASE_URL" in result.output


def test_prompt_carries_the_guide_and_the_turns_before(server: FakeOpenAI) -> None:
    from mimesis_rl.behavior.context import TurnInContext
    from mimesis_rl.behavior.labelers.llm import guide_instructions, render_turn

    guide = guide_instructions()
    assert guide.startswith("## How to label") and "Co-occurrence rules" in guide
    assert "How the items were chosen" not in guide  # the sampling notes are not instructions
    history = tuple(Turn(role="assistant" if i % 2 else "user", content=f"turn {i}") for i in range(8))
    ctx = TurnInContext(text="fine, whatever", history=history)
    shown = render_turn(ctx, history_turns=3)
    assert shown.splitlines() == [
        "(5 earlier turns not shown)",
        "AGENT: turn 5",
        "USER: turn 6",
        "AGENT: turn 7",
        "USER (label this): fine, whatever",
    ]
    # the agent's last turn stays in view even when the user spoke several times since
    more = tuple(Turn(role="user", content="more") for _ in range(4))
    chatty = TurnInContext(text="and?", history=(history[1], *more))
    assert render_turn(chatty, history_turns=2).splitlines()[1] == "AGENT: turn 1"
    opening = render_turn(TurnInContext(text="hi"), history_turns=6)
    assert "AGENT: (none: the user opens the conversation)" in opening

    labeler = _labeler(server)
    labeler.label([CONV])
    system = server.requests[0]["messages"][0]["content"]
    assert guide in system and "do not label it when" in system
    short = _labeler(server, instructions="taxonomy", history_turns=0)
    assert guide not in short.system and "negotiation" in short.system
    with pytest.raises(ValueError, match="label.llm.instructions"):
        _labeler(server, instructions="vibes")
    labeler.close()
    short.close()
