"""The `llm` coach against a real local OpenAI-style HTTP server, and the `model` coach on a tiny model:
notes per agent turn, template fallback for unusable answers, leaks measured then redacted by the driver."""

from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import torch

from mimesis_rl.agent.coach.context import contexts_from_trace
from mimesis_rl.agent.coach.factory import build_coach
from mimesis_rl.agent.coach.leaks import leaks
from mimesis_rl.agent.coach.llm import LLMCoach
from mimesis_rl.agent.csd.driver import CSD
from mimesis_rl.agent.csd.settings import CSDSettings
from mimesis_rl.behavior.openai_client import ChatClient, ChatClientSettings, EndpointError
from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import TraceTurn
from mimesis_rl.models.loading import load_base
from mimesis_rl.models.testing import TINY_TEST_CONFIG, make_tiny_base

pytestmark = pytest.mark.integration

GOAL = GoalCard(
    text="Buy; at most $430.", slots={"item": "kayak", "reservation": 430}, private=["reservation"]
)
TRACE = [
    TraceTurn("user", "hi"),
    TraceTurn("assistant", "What would you pay?"),
    TraceTurn("user", "not sure", reasoning="430 is my limit but I won't say", patterns=["withholding_info"]),
    TraceTurn("assistant", "520 then?"),
    TraceTurn("user", "too much", reasoning="too expensive"),
]


class CoachServer:
    """Answers by the agent message in the prompt: a leaking note, a one-word note, or an error."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                prompt = body["messages"][-1]["content"]
                if "boom" in prompt:
                    return self._send(400, {"error": "bad"})
                text = (
                    "They will pay up to 430, so offer exactly $430 now." if "What would" in prompt else "ok"
                )
                self._send(200, {"choices": [{"message": {"role": "assistant", "content": text}}]})

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def server():
    s = CoachServer()
    yield s
    s.httpd.shutdown()


def _record(trace=TRACE) -> dict[str, Any]:
    return {
        "episode_id": "bargain-1#0",
        "domain": "bargain",
        "goal": GOAL.model_dump(),
        "end_reason": "user_left",
        "turns": [dataclasses.asdict(t) for t in trace],
        "agent_spans": [[0, 4], [9, 12]],
    }


def test_llm_coach_notes_fallback_and_leak_guard(server):
    coach = LLMCoach(ChatClient(ChatClientSettings(base_url=server.url, model="coach", max_retries=0)))
    contexts = contexts_from_trace("bargain-1#0", "bargain", GOAL, TRACE, "user_left")
    notes = coach.notes(contexts)
    assert len(notes) == 2 and len(server.requests) == 2
    assert leaks(notes[0], GOAL) == ["reservation"]  # the endpoint leaked the budget
    assert coach.written == 1 and coach.fallbacks == 1  # "ok" is too short: template note instead
    assert "430" not in json.dumps(server.requests[0]["messages"][0])  # the system prompt forbids numbers


def test_driver_measures_and_redacts_leaks(server, tiny_tok):
    coach = LLMCoach(ChatClient(ChatClientSettings(base_url=server.url, model="coach", max_retries=0)))
    csd = CSD(CSDSettings(enabled=True, lam=1.0), tiny_tok, coach)
    notes = csd._coach([_record()])[0]
    assert notes is not None and all(leaks(n, GOAL) == [] for n in notes)
    assert "their budget" in notes[0]
    ((_, counts),) = csd._notes.values()
    assert (counts["raw"], counts["kept"]) == (1, 0)
    # Episode ids repeat when the prompt set cycles: another dialogue under the same id is coached anew.
    other = [*TRACE[:3], TraceTurn("assistant", "Deal at 400?"), TraceTurn("user", "yes", reasoning="fine")]
    again = csd._coach([_record(other)])[0]
    assert len(csd._notes) == 2 and again is not None and again[1] != notes[1]


def test_llm_coach_error_names_the_turn(server):
    coach = LLMCoach(ChatClient(ChatClientSettings(base_url=server.url, model="coach", max_retries=0)))
    trace = [TraceTurn("user", "hi"), TraceTurn("assistant", "boom"), TraceTurn("user", "eh")]
    with pytest.raises(EndpointError, match="coach note for 'e#0' agent turn 1"):
        coach.notes(contexts_from_trace("e#0", "bargain", GOAL, trace, None))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.set_num_threads(1)
    folder = make_tiny_base(
        tmp_path_factory.mktemp("coach") / "base",
        config=dataclasses.replace(TINY_TEST_CONFIG, max_position_embeddings=1024),
    )
    torch.manual_seed(0)
    return load_base(folder, dtype=torch.float32, device="cpu")


@pytest.fixture(scope="module")
def tiny_tok(tiny):
    return tiny[1]


def test_model_coach_writes_one_note_per_turn(tiny):
    model, tok = tiny
    coach = build_coach("model", {"max_new_tokens": 12, "batch_size": 2}, model=model, tokenizer=tok, seed=1)
    contexts = contexts_from_trace("bargain-1#0", "bargain", GOAL, TRACE, "user_left")
    notes = coach.notes(contexts)
    assert len(notes) == 2 and all(n.strip() for n in notes)
    assert coach.written + coach.fallbacks == 2
