"""`SimulatorClient`: one call = the simulated user's next message, over `POST /v1/chat/completions`.

    client = SimulatorClient("http://127.0.0.1:8000", api_key=os.environ["MIMESIS_API_KEY"])
    goal = Goal("Buy a rain jacket under 80 euros.", domain="shopping")
    turn = client.next_turn([], goal)                       # the user's opening
    turn = client.next_turn([{"role": "user", "content": turn.message},
                             {"role": "assistant", "content": "What size?"}], goal)
    turn.message, turn.ended

Messages are the agent's view (its own turns `assistant`, the user's `user`); agent-side `system`
messages are dropped, because the server reads a system message as the *user's* goal card. Only
httpx is needed, so the client can be copied into any training stack.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass(frozen=True)
class Goal:
    """What the simulated user wants (plain text), and optionally the domain and who they are."""

    text: str
    domain: str | None = None
    persona: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def coerce(cls, value: Goal | Mapping[str, Any] | str | None) -> Goal | None:
        """A Goal from a Goal, a dict {text, domain?, persona?}, a plain string, or None (chit-chat)."""
        if value is None or isinstance(value, Goal):
            return value
        if isinstance(value, str):
            return cls(value)
        unknown = sorted(set(value) - {"text", "domain", "persona"})
        if unknown or "text" not in value:
            raise ValueError(f"goal {dict(value)!r}: expected keys text, domain?, persona?; "
                             f"unknown {unknown}")
        return cls(str(value["text"]), value.get("domain"), dict(value.get("persona") or {}))


@dataclass(frozen=True)
class UserTurn:
    message: str
    ended: bool


class SimulatorError(RuntimeError):
    """The server refused or failed a request; `status` and the server's message (which names the field)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"simulator server answered {status}: {message}")
        self.status = status


def request_body(model: str, messages: Sequence[Mapping[str, Any]], goal: Goal | None,
                 seed: int | None = None) -> dict[str, Any]:
    """The chat-completions body: the goal card as system message, the agent-side dialogue after it."""
    dialogue = [{"role": str(m["role"]), "content": _text(m.get("content"))}
                for m in messages if m.get("role") not in ("system", "developer")]
    body: dict[str, Any] = {"model": model, "messages": dialogue}
    if goal is not None:
        body["messages"] = [{"role": "system", "content": goal.text}, *dialogue]
        metadata: dict[str, Any] = {}
        if goal.domain:
            metadata["domain"] = goal.domain
        if goal.persona:
            metadata["persona"] = json.dumps(dict(goal.persona))
        if metadata:
            body["metadata"] = metadata
    if seed is not None:
        body["seed"] = seed
    if not body["messages"]:  # no goal, no dialogue: a chit-chat user opens
        body["metadata"] = {"domain": "chitchat"}
        body["messages"] = [{"role": "system", "content": "Have a casual, friendly chat."}]
    return body


def parse_response(response: httpx.Response) -> UserTurn:
    if response.status_code != 200:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:500]
        raise SimulatorError(response.status_code, message)
    choice = response.json()["choices"][0]
    return UserTurn(message=choice["message"]["content"] or "", ended=choice["finish_reason"] == "stop")


class SimulatorClient:
    """Sync and async access to one server; `model` defaults to the first one it serves."""

    def __init__(self, base_url: str, api_key: str | None = None, model: str | None = None,
                 timeout: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.api_key = api_key if api_key is not None else os.environ.get("MIMESIS_API_KEY")
        self.timeout = timeout
        self._model = model
        self._http = httpx.Client(timeout=timeout, headers=self._headers())

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def model(self) -> str:
        if self._model is None:
            self._model = self.models()[0]
        return self._model

    def models(self) -> list[str]:
        response = self._http.get(f"{self.base_url}/v1/models")
        if response.status_code != 200:
            parse_response(response)
        return [m["id"] for m in response.json()["data"]]

    def next_turn(self, messages: Sequence[Mapping[str, Any]],
                  goal: Goal | Mapping[str, Any] | str | None = None, seed: int | None = None) -> UserTurn:
        body = request_body(self.model, messages, Goal.coerce(goal), seed)
        return parse_response(self._http.post(f"{self.base_url}/v1/chat/completions", json=body))

    async def anext_turn(self, messages: Sequence[Mapping[str, Any]],
                         goal: Goal | Mapping[str, Any] | str | None = None, seed: int | None = None,
                         http: httpx.AsyncClient | None = None) -> UserTurn:
        body = request_body(self.model, messages, Goal.coerce(goal), seed)
        url = f"{self.base_url}/v1/chat/completions"
        if http is not None:
            return parse_response(await http.post(url, json=body, headers=self._headers()))
        async with httpx.AsyncClient(timeout=self.timeout, headers=self._headers()) as session:
            return parse_response(await session.post(url, json=body))

    def close(self) -> None:
        self._http.close()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)
