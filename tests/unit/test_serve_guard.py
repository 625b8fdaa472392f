"""The serve package's pure parts, without a model: key sources, the loopback rule, the per-key
token bucket (on an injected clock), the error shape, the chat request -> role-flipped prompt
mapping, and the adapters' request bodies."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi.exceptions import RequestValidationError

from mimesis_rl.envs.protocols import SessionSpec
from mimesis_rl.serve import RateLimiter, ServeSettings, is_loopback, key_id
from mimesis_rl.serve.adapters.client import Goal, SimulatorError, parse_response, request_body
from mimesis_rl.serve.chat import GENERIC_GOAL, build_prompt, known_domains
from mimesis_rl.serve.guard import error_body
from mimesis_rl.serve.schemas import ChatRequest
from mimesis_rl.simulator.format import OPENING_CUE

KEY = "k" * 20
CUE = OPENING_CUE


def card_user() -> Any:
    """Only `card` and `past_turn` are used by `build_prompt`: the card names the domain and the goal
    text, a past turn is marked."""
    return SimpleNamespace(card=lambda spec: f"CARD[{spec.domain}|{spec.goal.text}|{sorted(spec.persona)}]",
                           past_turn=lambda text: f"<past>{text}")


def prompt_for(body: dict[str, Any], **limits: Any) -> Any:
    args = {"max_chars": 100, "max_messages": 10, **limits}
    return build_prompt(ChatRequest(model="m", **body), card_user(), known_domains(), args["max_chars"],
                        args["max_messages"])


def test_keys_come_from_settings_env_and_file(tmp_path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# comment\nfile-key-0123456789abcdef  # trailing\n\n")
    settings = ServeSettings(api_keys=(KEY,), keys_file=str(keys))
    env = {"MIMESIS_API_KEYS": f" env-key-0123456789abcdef , {KEY} ,"}
    assert settings.keys(env) == (KEY, "env-key-0123456789abcdef", "file-key-0123456789abcdef")
    assert ServeSettings(auth=False).required_keys({}) == ()
    with pytest.raises(ValueError, match="no API keys"):
        ServeSettings().required_keys({})
    with pytest.raises(ValueError, match="at least 16 characters"):
        ServeSettings().keys({"MIMESIS_API_KEYS": "short"})
    with pytest.raises(FileNotFoundError, match="keys_file"):
        ServeSettings(keys_file=str(tmp_path / "missing")).keys({})
    with pytest.raises(ValueError, match="never go in params.yaml"):
        ServeSettings.from_section({"api_keys": [KEY]})
    with pytest.raises(ValueError, match="rate_per_s"):
        ServeSettings(rate_per_s=0)


def test_no_auth_only_on_loopback() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.2", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.5", "192.168.1.2", "example.org", "::"))


def test_rate_limiter_refills_on_its_clock() -> None:
    now = [0.0]
    limiter = RateLimiter(rate_per_s=2.0, burst=2, clock=lambda: now[0])
    assert [limiter.take("a"), limiter.take("a")] == [0.0, 0.0]
    assert limiter.take("a") == pytest.approx(0.5)  # empty: half a second to the next token
    assert limiter.take("b") == 0.0  # another key has its own bucket
    now[0] = 0.5
    assert limiter.take("a") == 0.0 and limiter.take("a") > 0
    now[0] = 100.0
    assert [limiter.take("a") for _ in range(3)][:2] == [0.0, 0.0]  # refills only up to the burst


def test_key_ids_hide_the_key_and_errors_have_both_shapes() -> None:
    assert key_id(KEY).startswith("key-") and KEY not in key_id(KEY) and key_id(KEY) == key_id(KEY)
    body = error_body(429, "slow down", "rate_limited")
    assert body["detail"] == "slow down"
    assert body["error"] == {"message": "slow down", "type": "rate_limit_error", "param": None,
                             "code": "rate_limited"}
    assert error_body(401, "x", "c")["error"]["type"] == "authentication_error"


def test_chat_prompt_flips_roles_and_opens_with_the_cue() -> None:
    opening = prompt_for({"messages": [{"role": "system", "content": "Buy a jacket."}],
                          "metadata": {"domain": "shopping", "persona": '{"age": 30}'}})
    assert opening.spec.domain == "shopping" and opening.spec.persona == {"age": 30}
    assert opening.messages == [{"role": "system", "content": "CARD[shopping|Buy a jacket.|['age']]"},
                                {"role": "user", "content": CUE}]
    later = prompt_for({"messages": [
        {"role": "system", "content": "Buy a jacket."},
        {"role": "user", "content": "hi, I need a jacket"},
        {"role": "assistant", "content": [{"type": "text", "text": "What "},
                                          {"type": "text", "text": "size?"}]},
    ]})
    assert later.spec.domain == "general"  # a goal card without a domain
    assert [m["role"] for m in later.messages] == ["system", "user", "assistant", "user"]
    assert later.messages[2]["content"] == "<past>hi, I need a jacket"
    assert later.messages[3]["content"] == "What size?"
    agent_first = prompt_for({"messages": [{"role": "assistant", "content": "Welcome! How can I help?"}]})
    assert agent_first.spec.domain == "chitchat" and agent_first.spec.goal.text == GENERIC_GOAL
    assert [m["role"] for m in agent_first.messages] == ["system", "user"]  # no cue: the agent spoke


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"messages": []}, "messages", "no messages"),
    ({"messages": [{"role": "assistant", "content": "x" * 101}]}, "messages.0.content", "limit is 100"),
    ({"messages": [{"role": "assistant", "content": " "}]}, "messages.0.content", "must not be empty"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "g"}]}, "messages.1.role",
     "only come first"),
    ({"messages": [{"role": "user", "content": "a"}]}, "messages.0.role", "the last message is the user's"),
    ({"messages": [{"role": "assistant", "content": "a"}] * 2}, "messages.1.role", "in a row"),
    ({"messages": [{"role": "assistant", "content": "a"}], "metadata": {"domain": "mars"}},
     "metadata.domain", "unknown domain 'mars'"),
    ({"messages": [{"role": "assistant", "content": "a"}], "metadata": {"persona": "[1]"}},
     "metadata.persona", "JSON object"),
    ({"messages": [{"role": "assistant", "content": "a"}], "stream": True}, "stream", "streaming"),
    ({"messages": [{"role": "assistant", "content": "a"}], "n": 3}, "n", "n=3"),
    ({"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}] * 6}, "messages",
     "limit is 10"),
])
def test_bad_chat_requests_name_the_field(body: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(RequestValidationError) as caught:
        prompt_for(body)
    error = caught.value.errors()[0]
    assert ".".join(str(p) for p in error["loc"][1:]) == field and words in error["msg"]


def test_ignored_openai_knobs_are_named() -> None:
    request = ChatRequest(model="m", messages=[], temperature=0.7, max_tokens=20, user="u1")
    assert request.ignored() == ["temperature", "max_tokens", "user"]


def test_client_request_bodies_and_errors() -> None:
    goal = Goal.coerce({"text": "Buy a jacket.", "domain": "shopping", "persona": {"age": 30}})
    body = request_body("m", [{"role": "system", "content": "agent prompt"},
                              {"role": "user", "content": "hi"},
                              {"role": "assistant", "content": "Hello"}], goal, seed=4)
    assert body["messages"][0] == {"role": "system", "content": "Buy a jacket."}  # the agent's own is dropped
    assert [m["role"] for m in body["messages"][1:]] == ["user", "assistant"]
    assert body["metadata"] == {"domain": "shopping", "persona": '{"age": 30}'} and body["seed"] == 4
    assert request_body("m", [], None)["metadata"] == {"domain": "chitchat"}
    with pytest.raises(ValueError, match="unknown"):
        Goal.coerce({"txt": "typo"})
    ok = httpx.Response(200, json={"choices": [{"finish_reason": "stop", "message": {"content": "bye"}}]})
    assert parse_response(ok).ended and parse_response(ok).message == "bye"
    refused = httpx.Response(429, json={"error": {"message": "rate limit exceeded"}})
    with pytest.raises(SimulatorError, match="429: rate limit exceeded"):
        parse_response(refused)


def test_session_spec_card_is_the_users() -> None:
    spec = prompt_for({"messages": [{"role": "system", "content": "Return the shoes."}],
                       "metadata": {"domain": "returns"}}).spec
    assert isinstance(spec, SessionSpec) and spec.goal.text == "Return the shoes." and spec.seed == 0
