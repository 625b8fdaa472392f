"""The OpenAI-compatible routes: `GET /v1/models[/{id}]` and `POST /v1/chat/completions`.

The chat endpoint is stateless: the caller is the agent, the answer is the simulated user's next
message (the prompt is rebuilt from the request each time, see `serve.chat`); with `serve.raw` it
serves the model as a plain generation engine instead (prompt in, text out), which is what an
`openai:` user on the client side talks to.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import uuid
from typing import Any

from fastapi import FastAPI

from mimesis_rl.serve.chat import build_prompt, check_chat, check_length, invalid
from mimesis_rl.serve.context import ServeContext
from mimesis_rl.serve.errors import ApiError
from mimesis_rl.serve.schemas import ChatRequest


def add_openai_routes(app: FastAPI, ctx: ServeContext) -> None:
    """Register the models and chat-completions routes of `ctx`'s user on `app`."""
    user, settings = ctx.user, ctx.settings

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [ctx.model_card(m) for m in ctx.served]}

    @app.get("/v1/models/{model:path}")
    async def model(model: str) -> dict[str, Any]:
        ctx.check_model(model)
        return ctx.model_card(model)

    raw_lock = threading.Lock()  # raw completions share the model with the batcher's thread: one at a time

    async def raw_completion(body: ChatRequest) -> dict[str, Any]:
        """`serve.raw`: the model as a plain engine (see ServeSettings.raw): prompt in, text out."""
        if not callable(getattr(user, "continue_raw", None)):
            raise ApiError(501, f"{user.name} cannot serve raw completions", "not_implemented")
        if body.stream:
            raise invalid(("stream",), "streaming is not supported: send stream=false")
        if not body.messages:
            raise invalid(("messages",), "no messages")
        if len(body.messages) > settings.max_messages:
            raise invalid(("messages",),
                          f"{len(body.messages)} messages; the limit is {settings.max_messages}")
        messages = []
        for i, message in enumerate(body.messages):
            check_length(message.text(), settings.max_message_chars, ("messages", i, "content"),
                         allow_empty=True)
            role = "system" if message.role == "developer" else message.role
            messages.append({"role": role, "content": message.text()})
        prefill = ""
        if body.continue_final_message:
            if messages[-1]["role"] != "assistant":
                raise invalid(("messages", len(messages) - 1, "role"),
                              "continue_final_message needs a final assistant message to continue")
            prefill = messages.pop()["content"]
        sampling, ignored = user.sampling, []
        if body.temperature is not None:
            sampling = (dataclasses.replace(sampling, do_sample=False) if body.temperature <= 0 else
                        dataclasses.replace(sampling, do_sample=True, temperature=body.temperature))
        if body.top_p is not None:
            sampling = dataclasses.replace(sampling, top_p=body.top_p)
        if body.max_tokens is not None and body.max_tokens != sampling.max_new_tokens:
            ignored.append("max_tokens")  # the served simulator's turn budget is fixed (GET /v1/info)

        def run() -> Any:
            with raw_lock:
                return user.continue_raw(messages, prefill, body.seed or 0, sampling)

        try:
            gen = await asyncio.wait_for(asyncio.to_thread(run), settings.request_timeout_s)
        except TimeoutError:
            ctx.metrics.timeouts.inc()
            raise ApiError(504, f"no completion within {settings.request_timeout_s:g} s", "timeout") from None
        if gen is None:
            raise invalid(("messages",), "the prompt leaves no room for a completion in the model's context")
        text = user.runner.chat.decode(gen.token_ids)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": body.model, "system_fingerprint": None,
            "usage": {"completion_tokens": len(gen.token_ids)},
            "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop" if gen.stopped else "length",
                         "message": {"role": "assistant", "content": text, "refusal": None}}],
            "mimesis": {"raw": True, "ignored": ignored},
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatRequest) -> dict[str, Any]:
        replaced = check_chat(body)  # the edge rule (serve.chat): a 422 naming the field, or replaced
        ctx.check_model(body.model)
        if settings.raw:
            return await raw_completion(body)
        if not all(callable(getattr(user, m, None)) for m in ("reply", "card", "past_turn")):
            raise ApiError(501, f"{user.name} answers sessions only (no stateless `reply`): use /v1/sessions",
                           "not_implemented")
        prompt = build_prompt(body, user, ctx.domains, settings.max_message_chars, settings.max_messages)
        reply = await ctx.in_time(ctx.batcher.reply(prompt.messages, body.seed), "the user's next message")
        extra: dict[str, Any] = {"ended": reply.ended, "domain": prompt.spec.domain,
                                 "ignored": body.ignored()}
        if replaced:
            extra["replaced_characters"] = replaced
        if reply.meta.get("error"):
            extra["rejected"] = str(reply.meta["error"])
        if "accept" in reply.meta:  # the decision its reasoning took where its message says neither
            extra["accept"] = bool(reply.meta["accept"])
        if ctx.expose:
            extra["reasoning"] = reply.reasoning
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": body.model, "system_fingerprint": None, "usage": None,
            # finish_reason: "stop" = the user has left (the dialogue is over); null = the user stays.
            "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop" if reply.ended else None,
                         "message": {"role": "assistant", "content": reply.message, "refusal": None}}],
            "mimesis": extra,
        }
