"""A smoke generation: proof that a saved base loads, renders its chat template and stops cleanly."""

from __future__ import annotations

import time
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

SMOKE_CHAT = [{"role": "user", "content": "Hi! Can you suggest a quiet hotel for two nights?"}]


@torch.no_grad()
def smoke_generate(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, max_new_tokens: int = 16,
                   chat: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """Greedy-decode a reply to a one-turn chat; returns the text, token count and speed."""
    inputs = tokenizer.apply_chat_template(chat or SMOKE_CHAT, add_generation_prompt=True,
                                           return_tensors="pt", return_dict=True).to(model.device)
    start = time.perf_counter()
    output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                            pad_token_id=tokenizer.pad_token_id)
    seconds = time.perf_counter() - start
    new_tokens = output[0, inputs["input_ids"].shape[1]:]
    return {
        "prompt_tokens": int(inputs["input_ids"].shape[1]),
        "new_tokens": int(new_tokens.numel()),
        "text": tokenizer.decode(new_tokens, skip_special_tokens=True),
        "seconds": seconds,
        "tokens_per_second": new_tokens.numel() / seconds if seconds > 0 else 0.0,
    }
