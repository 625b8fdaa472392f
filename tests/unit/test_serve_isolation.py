"""One bad request never hurts another: text is checked at the edge (422 naming the field), a
request that fails inside a shared batch fails alone while the rest of the batch is answered, and
random request bodies never get a 500. The user side here is a fast scripted one whose "tokenizer"
encodes every text strictly, as a real one does; tests/integration/test_serve.py runs the same
properties against the real tiny simulator."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from mimesis_rl.envs.protocols import SessionSpec, UserReply
from mimesis_rl.serve import ServeSettings, create_app
from mimesis_rl.serve.batcher import MicroBatcher
from mimesis_rl.simulator.format import parse_output, render_target

KEY = "test-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
POISON = "POISON-PILL"  # a text only the user side can find fault with (the edge cannot know it)
MODEL = "scripted-test-user"


class StrictUser:
    """Echoes the agent; encodes every text as a tokenizer would (a lone surrogate raises), fails a
    whole call when any text in it holds POISON, and records each call's size."""

    name = MODEL
    card_style = "simulator"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def card(self, spec: SessionSpec) -> str:
        return f"You want: {spec.goal.text} ({spec.domain})"

    def past_turn(self, message: str, reasoning: str | None = None, ended: bool = False) -> str:
        return render_target(reasoning, message, ended)

    def _encode(self, texts: list[str]) -> None:
        for text in texts:
            text.encode("utf-8")  # UnicodeEncodeError on a lone surrogate, as a tokenizer's encode
            if POISON in text:
                raise RuntimeError("the model cannot take this text")

    def start(self, specs: list[SessionSpec]) -> list[dict[str, Any]]:
        return [{"goal": s.goal.text, "said": []} for s in specs]

    def opening(self, sessions: list[dict[str, Any]]) -> list[UserReply]:
        self.calls.append(("opening", len(sessions)))
        self._encode([s["goal"] for s in sessions])
        return [UserReply(message=f"hi, {s['goal'][:20]}") for s in sessions]

    def respond(self, sessions: list[dict[str, Any]], messages: list[str]) -> list[UserReply]:
        self.calls.append(("respond", len(sessions)))
        self._encode(messages)
        for session, message in zip(sessions, messages, strict=True):
            session["said"].append(message)
        return [UserReply(message=f"you said {m[:20]}") for m in messages]

    def reply(self, prompts: list[list[dict[str, str]]], seed: int | None = None) -> list[Any]:
        self.calls.append(("reply", len(prompts)))
        self._encode([m["content"] for p in prompts for m in p])
        return [parse_output(render_target("thinking", f"reply {len(p)}")) for p in prompts]


def client_for(user: StrictUser, **overrides: Any) -> TestClient:
    settings = ServeSettings(**{"model": MODEL, "api_keys": (KEY,), "batch_window_ms": 0, **overrides})
    return TestClient(create_app(user, settings, environ={}), headers=AUTH)


def chat(content: str) -> str:
    """A chat-completions body as raw JSON text, so JSON escapes such as \\ud800 reach the server."""
    return ('{"model": "' + MODEL + '", "messages": [{"role": "system", "content": "Buy a jacket."}, '
            '{"role": "assistant", "content": "' + content + '"}]}')


def test_a_lone_surrogate_is_refused_anywhere_naming_the_field() -> None:
    user = StrictUser()
    with client_for(user) as client:
        answer = client.post("/v1/chat/completions", content=chat("hello \\ud800"))
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["param"] == "messages.1.content" and "lone surrogate" in answer.text
        body = '{"domain": "shopping", "goal": {"text": "a jacket \\ud800"}}'
        opened = client.post("/v1/sessions", content=body)
        assert opened.status_code == 422 and opened.json()["error"]["param"] == "goal.text"
        sid = client.post("/v1/sessions", json={"domain": "shopping", "goal": {"text": "a jacket"}}).json()
        url = f"/v1/sessions/{sid['session_id']}/messages"
        sent = client.post(url, content='{"message": "x\\udfff"}')
        assert sent.status_code == 422 and sent.json()["error"]["param"] == "message"
        assert client.post(url, json={"message": "ok"}).status_code == 200
    assert user.calls == [("opening", 1), ("respond", 1)]  # nothing refused reached the user side


@pytest.mark.parametrize(("escape", "words"), [("\\u0000", "NUL"), ("\\u0007", "control character")])
def test_control_characters_are_refused_in_setup_and_replaced_in_dialogue(escape: str, words: str) -> None:
    user = StrictUser()
    with client_for(user) as client:
        card = chat("fine").replace("Buy a jacket.", "Buy" + escape)
        setup = client.post("/v1/chat/completions", content=card)
        assert setup.status_code == 422 and setup.json()["error"]["param"] == "messages.0.content"
        assert words in setup.text
        body = '{"domain": "shopping", "goal": {"text": "a' + escape + '"}}'
        opened = client.post("/v1/sessions", content=body)
        assert opened.status_code == 422 and opened.json()["error"]["param"] == "goal.text"
        answer = client.post("/v1/chat/completions", content=chat("hello " + escape))
        assert answer.status_code == 200 and answer.json()["mimesis"]["replaced_characters"] == 1
        sid = client.post("/v1/sessions", json={"domain": "shopping", "goal": {"text": "a jacket"}}).json()
        url = f"/v1/sessions/{sid['session_id']}/messages"
        sent = client.post(url, content='{"message": "x' + escape + 'y"}')
        assert sent.status_code == 200 and sent.json()["replaced_characters"] == 1
        transcript = client.get(f"/v1/sessions/{sid['session_id']}").json()
        assert transcript["turns"][1]["content"] == "x\ufffdy"  # what the user side was given


def test_tabs_newlines_and_bidi_marks_pass() -> None:
    with client_for(StrictUser()) as client:
        answer = client.post("/v1/chat/completions", content=chat("a\\tb\\nc\\r \\u200f"))
        assert answer.status_code == 200, answer.text


def test_a_request_failing_inside_a_shared_batch_fails_alone() -> None:
    user = StrictUser()
    texts = ["one", "two", POISON, "four", "five"]
    # A long window that the full batch (5) cuts short: all five share the first call.
    with client_for(user, batch_window_ms=60_000, max_batch=5) as client, ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda t: client.post("/v1/chat/completions", content=chat(t)), texts))
        codes = [a.status_code for a in answers]
        assert codes == [200, 200, 500, 200, 200], [a.text for a in answers]
        assert "the simulator failed on the user's next message" in answers[2].json()["detail"]
        assert answers[2].json()["error"]["code"] == "simulator_error"
        assert client.get("/healthz").json()["batched_requests"] == 4
    assert user.calls[0] == ("reply", 5) and sum(n for _, n in user.calls[1:] if n == 1) >= 1
    assert len(user.calls) <= 1 + 2 * 3  # halves down to the poison: about 2·log2(5) retries


def test_a_valid_request_concurrent_with_a_surrogate_one_succeeds() -> None:
    user = StrictUser()
    with client_for(user, batch_window_ms=200, max_batch=8) as client, ThreadPoolExecutor(2) as pool:
        bad = pool.submit(client.post, "/v1/chat/completions", content=chat("\\udc00 oops"))
        good = pool.submit(client.post, "/v1/chat/completions", content=chat("fine"))
        assert bad.result().status_code == 422 and good.result().status_code == 200


async def _respond_batch(user: StrictUser, messages: list[str]) -> list[Any]:
    import asyncio

    batcher = MicroBatcher(user, window_s=0.05, max_batch=len(messages))
    await batcher.start()
    sessions = user.start([SessionSpec(goal=_goal(), domain="shopping") for _ in messages])
    try:
        return await asyncio.gather(*(batcher.respond(s, m) for s, m in zip(sessions, messages, strict=True)),
                                    return_exceptions=True)
    finally:
        await batcher.stop()


def _goal() -> Any:
    from mimesis_rl.data.schema import GoalCard

    return GoalCard(text="a jacket")


def test_the_batcher_bisects_a_failed_call() -> None:
    import asyncio

    user = StrictUser()
    messages = [f"m{i}" for i in range(8)]
    messages[5] = POISON
    results = asyncio.run(_respond_batch(user, messages))
    assert [isinstance(r, RuntimeError) for r in results] == [i == 5 for i in range(8)]
    answered = [r.message for i, r in enumerate(results) if i != 5]
    assert answered == [f"you said m{i}" for i in range(8) if i != 5]
    # 8 fail -> [0-3] ok, [4-7] fail -> [4,5] fail -> [4] ok, [5] fails alone; [6,7] ok
    assert [n for _, n in user.calls] == [8, 4, 4, 2, 1, 1, 2]


# -- property: random bodies never produce a 500 -------------------------------------------------

TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12) | st.sampled_from(
    ["", " ", "\ud800", "\x00", "shopping", MODEL, "user", "assistant", "system"])
JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                       max_leaves=8)
ROLE = st.sampled_from(["system", "user", "assistant", "tool"]) | TEXT
MESSAGE = st.fixed_dictionaries({"role": ROLE, "content": TEXT | JSONISH})
METADATA = JSONISH | st.fixed_dictionaries({"domain": TEXT, "persona": TEXT | JSONISH})
MESSAGES = st.lists(MESSAGE, max_size=4) | JSONISH
CHAT = st.fixed_dictionaries({"model": st.just(MODEL) | TEXT, "messages": MESSAGES},
                             optional={"metadata": METADATA, "seed": JSONISH, "n": JSONISH})
SESSION = st.fixed_dictionaries({"domain": st.just("shopping") | TEXT,
                                 "goal": st.fixed_dictionaries({"text": TEXT}) | JSONISH},
                                optional={"persona": JSONISH, "seed": JSONISH})


def _raw(body: Any) -> str:
    """JSON text, lone surrogates as \\udXXX escapes and NaN/Infinity as Python writes them."""
    return json.dumps(body, ensure_ascii=True)


@settings(max_examples=60)
@given(chat_body=CHAT | JSONISH, session_body=SESSION | JSONISH, message=JSONISH)
def test_random_bodies_never_get_a_500(chat_body: Any, session_body: Any, message: Any) -> None:
    with client_for(StrictUser()) as client:
        for path, body in (("/v1/chat/completions", chat_body), ("/v1/sessions", session_body)):
            answer = client.post(path, content=_raw(body))
            assert answer.status_code < 500, (path, body, answer.text)
            assert "error" in answer.json() or answer.status_code in (200, 201)
        opened = client.post("/v1/sessions", json={"domain": "shopping", "goal": {"text": "x"}})
        sid = opened.json()["session_id"]
        answer = client.post(f"/v1/sessions/{sid}/messages", content=_raw({"message": message}))
        assert answer.status_code < 500, (message, answer.text)
        assert client.get("/healthz").status_code == 200
