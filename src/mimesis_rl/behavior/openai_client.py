"""A small client for any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, llama.cpp, Ollama, ...).

Shared by every part of `behavior` that asks an LLM (the `llm` labeler, the `llm` reasoning backend).
Configuration comes from params plus the environment (the key never sits in params.yaml). Transient
failures (connection errors, timeouts, HTTP 429 and 5xx) are retried with backoff; anything else, or
running out of attempts, raises `EndpointError` naming the URL and what went wrong.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class EndpointError(RuntimeError):
    """The endpoint is unreachable, keeps failing, or answers something that is not a chat completion."""


@dataclass(frozen=True)
class ChatClientSettings:
    """Where and how to call the endpoint.

    Endpoint:
        base_url: as for the OpenAI SDK, e.g. `http://127.0.0.1:8000/v1` (without `/v1`, it is added).
        model: the model name the server expects.
        api_key: sent as a Bearer token when set.
    Robustness:
        timeout_s: per request; max_retries: extra attempts after the first; backoff_s: first wait,
        doubled after each failure.
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 30.0
    max_retries: int = 3
    backoff_s: float = 1.0

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        if base.endswith("/chat/completions"):
            return base
        if not base.endswith("/v1"):
            base += "/v1"
        return base + "/chat/completions"

    @classmethod
    def from_section(cls, section: Mapping[str, Any], where: str = "llm") -> ChatClientSettings:
        """From a params section naming env variables: `base_url_env`, `api_key_env`, `model(_env)`.

        A literal `base_url` / `model` in the section wins over the environment.
        """
        env = {"base_url": str(section.get("base_url_env", "OPENAI_BASE_URL")),
               "model": str(section.get("model_env", "OPENAI_MODEL")),
               "api_key": str(section.get("api_key_env", "OPENAI_API_KEY"))}
        base_url = section.get("base_url") or os.environ.get(env["base_url"])
        model = section.get("model") or os.environ.get(env["model"])
        missing = [name for name, value in (("base_url", base_url), ("model", model)) if not value]
        if missing:
            how = ", ".join(f"${env[m]} or `{where}.{m}`" for m in missing)
            raise EndpointError(f"{where}: no {' and no '.join(missing)} configured; set {how}")
        return cls(base_url=str(base_url), model=str(model), api_key=os.environ.get(env["api_key"]) or None,
                   timeout_s=float(section.get("timeout_s", 30.0)),
                   max_retries=int(section.get("max_retries", 3)),
                   backoff_s=float(section.get("backoff_s", 1.0)))


class ChatClient:
    """`chat(messages) -> str`: the first choice's message content."""

    def __init__(self, config: ChatClientSettings, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        headers = {"Content-Type": "application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._http = httpx.Client(timeout=config.timeout_s, headers=headers, transport=transport)

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def chat(self, messages: Sequence[Mapping[str, str]], **options: Any) -> str:
        """Send one chat completion request; `options` (temperature, max_tokens, ...) go in the body."""
        body = {"model": self.config.model, "messages": list(messages), **options}
        data = self._post(body)
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise EndpointError(f"{self.config.url}: response has no choices[0].message.content: "
                                f"{json.dumps(data)[:300]}") from None
        return content if isinstance(content, str) else ""

    def completion(self, messages: Sequence[Mapping[str, str]], **options: Any) -> dict[str, Any]:
        """The whole JSON answer of one request (callers that need `finish_reason` or extensions)."""
        return self._post({"model": self.config.model, "messages": list(messages), **options})

    def _post(self, body: Mapping[str, Any]) -> dict[str, Any]:
        url, attempts = self.config.url, self.config.max_retries + 1
        wait, last = self.config.backoff_s, ""
        for attempt in range(1, attempts + 1):
            try:
                response = self._http.post(url, json=body)
            except httpx.TimeoutException as exc:
                last = f"timed out after {self.config.timeout_s:g}s ({type(exc).__name__})"
            except httpx.TransportError as exc:
                last = f"unreachable ({type(exc).__name__}: {exc})"
            else:
                if response.status_code < 400:
                    try:
                        return response.json()
                    except ValueError:
                        raise EndpointError(f"{url}: answered HTTP {response.status_code} with a non-JSON "
                                            f"body: {response.text[:200]!r}") from None
                last = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code not in RETRY_STATUS:
                    raise EndpointError(f"{url}: {last}")
            if attempt < attempts:
                log.warning("%s: attempt %d/%d failed (%s); retrying in %.1fs",
                            url, attempt, attempts, last, wait)
                time.sleep(wait)
                wait *= 2
        raise EndpointError(f"{url}: {last} (gave up after {attempts} attempts)")
