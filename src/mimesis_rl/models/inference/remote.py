"""Generation on an OpenAI-compatible server (vLLM, SGLang, TGI, `mimesis serve --raw`, ...).

    openai:http://HOST:PORT/v1#MODEL      the user spec; the key comes from $MIMESIS_OPENAI_API_KEY
                                          (else $OPENAI_API_KEY), never from the spec or params.yaml

Why a runner and not a second simulator: a team past one machine runs generation on vLLM or SGLang,
but the *user* must stay the one `UserSimulator` runtime (card, trimming, `<think>` parsing, role-break
and repeat checks, re-sampling, the learned leave decision). `RemoteRunner` replaces only the model
call: it takes the role-flipped prompt as messages instead of token ids and returns the completion as
text. The forced start of the user's turn (`<think>`, or reasoning closed at its budget) is sent as a
final assistant message with vLLM's `continue_final_message` (`mimesis serve --raw` reads it too);
`prefill: false` leaves it out for servers that do not know the field.

Robustness: every request has a timeout, transient failures (timeouts, connection errors, 429/5xx)
are retried a bounded number of times with backoff (`behavior.openai_client`), and a server that
keeps failing or answers something that is not a chat completion raises `EndpointError` naming the
URL and what came back. Nothing waits forever.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.behavior.openai_client import ChatClient, ChatClientSettings, EndpointError
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.generation import Generation
from mimesis_rl.models.inference.runner import derive_seed
from mimesis_rl.settings import from_section

PREFIX = "openai:"
API_KEY_ENVS = ("MIMESIS_OPENAI_API_KEY", "OPENAI_API_KEY")
CHARS_PER_TOKEN = 3.0  # a conservative estimate (BPE tokenizers average ~4 on English chat)

__all__ = ["EndpointError", "RemoteGeneration", "RemoteOptions", "RemotePrompt", "RemoteRunner",
           "is_remote_spec", "parse_remote_spec"]


def is_remote_spec(spec: object) -> bool:
    return str(spec).startswith(PREFIX)


@dataclass(frozen=True)
class RemoteOptions:
    """How to talk to the server (params.yaml `rollout.remote`).

    api_key_env: the environment variable holding the Bearer key (empty: $MIMESIS_OPENAI_API_KEY, then
        $OPENAI_API_KEY; no key set sends none).
    timeout_s / max_retries / backoff_s: per request; extra attempts after the first; first wait.
    concurrency: requests in flight at once (one per dialogue row of a batch).
    max_context_tokens: the served model's context window (the dialogue is trimmed to it, counted at
        ~3 characters a token, as no tokenizer is at hand).
    prefill: send the forced start of the turn with `continue_final_message` (vLLM); false for
        servers that do not know it (the format is then the model's own business).
    leave_model: a simulator's learned leave model (`leave.json` of its folder or of `mimesis export`),
        so the served user leaves when the in-process one would; null = its own end marker only.
    decide_by_reasoning: the served simulator's decisions are read from its reasoning where its message
        says neither yes nor no, as its folder's `mimesis.json` records (`sim_sft.decide_by_reasoning`;
        `/v1/models` of `mimesis serve` shows it): a server returns text, so the client reads it.
    """

    api_key_env: str = ""
    timeout_s: float = 60.0
    max_retries: int = 2
    backoff_s: float = 0.5
    concurrency: int = 8
    max_context_tokens: int = 4096
    prefill: bool = True
    leave_model: str | None = None
    decide_by_reasoning: bool = False

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> RemoteOptions:
        return from_section(cls, section, "rollout.remote")

    def api_key(self) -> str | None:
        names = (self.api_key_env,) if self.api_key_env else API_KEY_ENVS
        return next((os.environ[n] for n in names if os.environ.get(n)), None)


def project_options() -> RemoteOptions:
    """params.yaml `rollout.remote` when run inside a checkout, else the defaults."""
    from mimesis_rl.config import load_params

    try:
        section = load_params().get("rollout", {}).get("remote")
    except (FileNotFoundError, ValueError):
        section = None
    return RemoteOptions.from_section(section)


def parse_remote_spec(spec: str) -> tuple[str, str]:
    """`openai:http://HOST:PORT/v1#MODEL` -> (base URL, model name), with an error naming what is wrong."""
    body = str(spec)[len(PREFIX):] if is_remote_spec(spec) else str(spec)
    url, sep, model = body.partition("#")
    if not sep or not model or not url.startswith(("http://", "https://")):
        raise ValueError(f"bad remote spec {spec!r}: expected openai:http(s)://HOST:PORT/v1#MODEL "
                         "(the model name as the server lists it under /v1/models)")
    return url, model


@dataclass
class RemotePrompt:
    """The role-flipped dialogue (system card first) and the start of the model's own turn."""

    messages: list[dict[str, str]]
    prefill: str = ""

    def __len__(self) -> int:  # estimated tokens: callers sort and budget by len(context)
        return estimate_tokens(self.messages) + estimate_tokens([{"content": self.prefill}])


@dataclass
class RemoteGeneration(Generation):
    """A completion as text: no token ids, no log-probs (a server's tokens are not ours)."""

    text: str = ""
    finish_reason: str | None = None


def estimate_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    return sum(int(len(str(m.get("content", ""))) / CHARS_PER_TOKEN) + 4 for m in messages)


@dataclass
class RemoteRunner:
    """A `ModelRunner` stand-in whose `generate` runs on an OpenAI-compatible chat-completions server.

    The same seeded-row contract as the local runner: each row sends `seed = derive_seed(seed, key)`,
    so a server that honours seeds (vLLM does) gives the same user the same randomness per episode.
    """

    base_url: str
    model_name: str
    sampling: SamplingParams = SamplingParams()
    seed: int = 0
    options: RemoteOptions = field(default_factory=RemoteOptions)
    transport: Any = None  # an httpx transport (tests)

    remote = True  # `UserSimulator` sends messages, not token ids, to such a runner
    tokenizer = None
    model = None
    guard = None
    reuse_cache = False

    def __post_init__(self) -> None:
        self.max_context = self.options.max_context_tokens
        self.client = ChatClient(ChatClientSettings(base_url=self.base_url, model=self.model_name,
                                                  api_key=self.options.api_key(),
                                                  timeout_s=self.options.timeout_s,
                                                  max_retries=self.options.max_retries,
                                                  backoff_s=self.options.backoff_s), transport=self.transport)
        self.batch_sizes: list[int] = []
        self.call_seconds: list[float] = []

    @classmethod
    def from_spec(cls, spec: str, sampling: SamplingParams, seed: int = 0,
                  options: RemoteOptions | None = None) -> RemoteRunner:
        url, model = parse_remote_spec(spec)
        return cls(url, model, sampling, seed, options or RemoteOptions())

    @property
    def url(self) -> str:
        return self.client.config.url

    def count_tokens(self, messages: Sequence[Mapping[str, str]]) -> int:
        return estimate_tokens(messages)

    def fits(self, context_len: int) -> bool:
        return context_len + self.sampling.max_new_tokens <= int(self.max_context)

    def prompt(self, messages: Sequence[Mapping[str, str]], prefill: str = "") -> RemotePrompt:
        return RemotePrompt([dict(m) for m in messages], prefill if self.options.prefill else "")

    def request(self, prompt: RemotePrompt, seed_key: object,
                sampling: SamplingParams) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """(messages, other fields) of one row's request: OpenAI's fields, plus vLLM's
        `continue_final_message` when the turn starts with a prefill."""
        messages = list(prompt.messages)
        body: dict[str, Any] = {"max_tokens": sampling.max_new_tokens,
                                "seed": derive_seed(self.seed, seed_key) % 2**31}
        if sampling.do_sample:
            body.update(temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            body["temperature"] = 0.0
        if prompt.prefill:
            messages.append({"role": "assistant", "content": prompt.prefill})
            body.update(continue_final_message=True, add_generation_prompt=False)
        return messages, body

    def _one(self, prompt: RemotePrompt, seed_key: object, sampling: SamplingParams) -> RemoteGeneration:
        messages, options = self.request(prompt, seed_key, sampling)
        data = self.client.completion(messages, **options)
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise EndpointError(f"{self.url}: the answer is not a chat completion (no choices[0].message."
                                f"content): {str(data)[:300]}") from None
        if content is not None and not isinstance(content, str):
            raise EndpointError(f"{self.url}: choices[0].message.content is {type(content).__name__}, "
                                "not text")
        reason = choice.get("finish_reason")
        return RemoteGeneration(token_ids=[], logprobs=[], stopped=reason != "length", text=content or "",
                                finish_reason=reason)

    def generate(self, contexts: Sequence[RemotePrompt], seed_keys: Sequence[object],
                 caches: Sequence[Any] | None = None,
                 sampling: SamplingParams | None = None) -> list[Generation | None]:
        """One request per row, `options.concurrency` at a time; None for a context too long to continue."""
        import time

        sampling = sampling or self.sampling
        out: list[Generation | None] = [None] * len(contexts)
        fit = [i for i, ctx in enumerate(contexts) if self.fits(len(ctx))]
        if not fit:
            return out
        self.batch_sizes.append(len(fit))
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, min(self.options.concurrency, len(fit)))) as pool:
            results = list(pool.map(lambda i: self._one(contexts[i], seed_keys[i], sampling), fit))
        self.call_seconds.append(round(time.perf_counter() - start, 3))
        for i, gen in zip(fit, results, strict=True):
            out[i] = gen
        return out

    def stream(self, items: Sequence[Any], on_finish: Any) -> None:
        """`ModelRunner.stream` over a server: each round's requests concurrently, then the follow-ups
        their outcomes asked for (a server batches for itself; there is no shared KV to refill)."""
        index = 0
        while items:
            gens: list[Generation | None] = [None] * len(items)
            for sampling in dict.fromkeys(item[3] for item in items):  # one concurrent call per decoding
                rows = [k for k, item in enumerate(items) if item[3] == sampling]
                contexts, keys = [items[k][0] for k in rows], [items[k][1] for k in rows]
                answers = self.generate(contexts, keys, None, sampling)
                for k, gen in zip(rows, answers, strict=True):
                    gens[k] = gen
            follow = [on_finish(index + k, gen) for k, gen in enumerate(gens)]
            index += len(items)
            items = [f for f in follow if f is not None]

    def close(self) -> None:
        self.client.close()
