"""The `openai:` user backend against real servers on loopback: the project's own `mimesis serve --raw`
(standing in for vLLM/SGLang, with an API key) drives `envs rollout`, `sim eval` and an agent stage's
user factory, with the runtime's checks on top; a small server that stalls, answers garbage, fails or
writes role breaks gets bounded retries and a clear error, never a hang."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sim_support import CONVERSATIONS, tiny_base, tiny_simulator
from typer.testing import CliRunner

from mimesis_rl.behavior.openai_client import EndpointError
from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import SessionSpec
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.remote import RemoteOptions
from mimesis_rl.serve import ServeSettings, load_app
from mimesis_rl.serve.local import LocalServer
from mimesis_rl.simulator.runtime import UserSimulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = "remote-test-key-0123456789"
FAST = RemoteOptions(timeout_s=0.5, max_retries=1, backoff_s=0.05)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("remote")
    return tiny_simulator(tiny_base(root / "base"), root / "simulator", steps=2)


@pytest.fixture(scope="module")
def served(folder: Path) -> Iterator[str]:
    """`mimesis serve --raw` on 127.0.0.1 with a key: the app the CLI runs, over the tiny simulator."""
    settings = ServeSettings(model=str(folder), raw=True, max_batch=4, batch_window_ms=0)
    app = load_app(settings, device="cpu", environ={"MIMESIS_API_KEYS": KEY})
    with LocalServer(app) as url:
        yield f"openai:{url}/v1#{folder}"


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIMESIS_OPENAI_API_KEY", KEY)


def test_a_remote_user_runs_the_runtime_on_top(served: str, folder: Path, keyed: None) -> None:
    sampling = SamplingParams(max_new_tokens=24, do_sample=True, max_retries=1)
    sim = UserSimulator.load(served, sampling=sampling,
                             options=RemoteOptions(leave_model=str(folder / "leave.json")))
    assert sim.remote and sim.tokenizer is None
    assert sim.leave_model is not None  # the folder's learned leave decision, as in process
    sessions = sim.start([SessionSpec(goal=GoalCard(text="Buy a green jacket.", slots={"color": "green"}),
                                      domain="shopping", seed=s) for s in range(3)])
    first = sim.opening(sessions)
    later = sim.respond(sessions, ["Which colour do you like?"] * 3)
    assert len(first) == len(later) == 3
    stats = sim.stats.as_dict() if hasattr(sim.stats, "as_dict") else vars(sim.stats)
    assert sum(sim.runner.batch_sizes) >= 6  # every turn went over HTTP
    for reply in first + later:  # a valid turn or an ended session with its reason: never raw text
        assert "<think>" not in reply.message and "</think>" not in reply.message
        assert reply.message or reply.ended
    assert stats["turns"] == 6  # the runtime's own counters were kept
    # The server continued the `<think>` prefill and the runtime parsed reasoning from the message.
    assert any(r.reasoning for r in first + later)


def test_envs_rollout_and_sim_eval_take_an_openai_user(served: str, keyed: None, tmp_path: Path) -> None:
    from mimesis_rl.cli import app

    runner = CliRunner()
    out = tmp_path / "t.jsonl"
    result = runner.invoke(app, ["envs", "rollout", "--env", "bargain", "--user", served, "-n", "2",
                                 "--out", str(out), "--max-turns", "2"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and all(r["user"] == served for r in records)
    result = runner.invoke(app, ["sim", "eval", "--model", served, "--data", str(CONVERSATIONS),
                                 "--embedding", "hashing", "--max-turns", "6", "--out", str(tmp_path / "rep"),
                                 "--device", "cpu"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{"):])
    assert "model" in summary["simulators"]


def test_an_agent_stage_user_from_params_is_served(served: str, keyed: None) -> None:
    """agent_sft/agent_rl build their users with `UserFactory`; a params.yaml `user: openai:…` is one."""
    from mimesis_rl.agent.users import UserFactory
    from mimesis_rl.envs.loop import play
    from mimesis_rl.envs.registry import make_env, scripted_agent

    factory = UserFactory(served, model=None, tokenizer=None,
                          sampling=SamplingParams(max_new_tokens=16, do_sample=True, max_retries=1))
    assert factory.simulator is not None and factory.simulator.remote
    states = play(make_env("bargain", max_turns=2), scripted_agent("bargain"), factory("bargain"),
                  [0])
    assert states and states[0].done


def test_a_missing_key_is_a_clear_error(served: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIMESIS_OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    sim = UserSimulator.load(served, options=FAST)
    sessions = sim.start([SessionSpec(goal=GoalCard(text="Buy a jacket."), domain="shopping")])
    with pytest.raises(EndpointError, match="HTTP 401"):
        sim.opening(sessions)


class Misbehaving(BaseHTTPRequestHandler):
    """stall: never answers in time; garbage: 200 with a non-JSON body; fail: 503; role: a valid
    completion whose text breaks the user role (the runtime's checks must catch it); verdict: a turn
    whose reasoning takes the offer and whose message says neither yes nor no."""

    mode = "stall"
    hits = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        type(self).hits += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.mode == "stall":
            time.sleep(3)
            return
        if self.mode == "fail":
            self._send(503, b'{"error": "overloaded"}')
        elif self.mode == "garbage":
            self._send(200, b"<html>not a completion</html>")
        else:
            content = ("They offer $300, so $300 is within my limit: I'll take it.</think>I'm happy with the "
                       "price." if self.mode == "verdict" else
                       "I want a jacket.</think>As an AI language model, how can I help you today?")
            body = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": content}}]}
            self._send(200, json.dumps(body).encode())

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def bad_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"openai:http://127.0.0.1:{server.server_address[1]}/v1#m"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("mode", "error"), [("stall", "timed out after 0.5s"), ("fail", "HTTP 503"),
                                             ("garbage", "non-JSON body")])
def test_a_bad_server_fails_fast_with_a_clear_error(bad_server: str, mode: str, error: str) -> None:
    Misbehaving.mode, Misbehaving.hits = mode, 0
    sim = UserSimulator.load(bad_server, options=FAST)
    sessions = sim.start([SessionSpec(goal=GoalCard(text="Buy a jacket."), domain="shopping")])
    start = time.monotonic()
    with pytest.raises(EndpointError, match=error) as caught:
        sim.opening(sessions)
    assert time.monotonic() - start < 5
    assert "127.0.0.1" in str(caught.value)
    assert Misbehaving.hits == (1 if mode == "garbage" else 2)  # garbage is not retried; the rest once


def test_role_breaks_from_a_server_are_resampled_then_end_the_session(bad_server: str) -> None:
    Misbehaving.mode, Misbehaving.hits = "role", 0
    sim = UserSimulator.load(bad_server, options=FAST,
                             sampling=SamplingParams(max_new_tokens=16, do_sample=True, max_retries=2))
    sessions = sim.start([SessionSpec(goal=GoalCard(text="Buy a jacket."), domain="shopping")])
    reply = sim.opening(sessions)[0]
    assert reply.ended and reply.meta["end_reason"].startswith("invalid_turn:role_break")
    assert Misbehaving.hits == 3  # the first sample and two re-samples


@pytest.mark.parametrize("decide", [True, False])
def test_a_served_simulator_decides_by_its_reasoning_when_told_so(bad_server: str, decide: bool) -> None:
    Misbehaving.mode, Misbehaving.hits = "verdict", 0
    options = RemoteOptions(timeout_s=0.5, max_retries=1, backoff_s=0.05, decide_by_reasoning=decide)
    sim = UserSimulator.load(bad_server, options=options)
    sessions = sim.start([SessionSpec(goal=GoalCard(text="Buy a desk for at most $320."), domain="bargain")])
    reply = sim.opening(sessions)[0]
    assert reply.message == "I'm happy with the price." and "I'll take it" in reply.reasoning
    # as in process: the reasoning's verdict decides where the message says neither (else the env reads no)
    assert reply.meta.get("accept") is (True if decide else None)


def test_serve_has_the_raw_switch() -> None:
    from mimesis_rl.cli import app

    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "--raw" in result.output


def test_bad_specs_name_the_problem() -> None:
    with pytest.raises(ValueError, match="openai:http"):
        UserSimulator.load("openai:127.0.0.1:8000")
    with pytest.raises(ValueError, match="MODEL"):
        UserSimulator.load("openai:http://127.0.0.1:8000/v1")
