"""`build_coach`: a coach backend from `agent_rl.csd` (`coach` and `coach_options`) in params.yaml."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mimesis_rl.agent.coach.base import COACHES, Coach
from mimesis_rl.agent.coach.llm import LLMCoach
from mimesis_rl.agent.coach.model import ModelCoach
from mimesis_rl.agent.coach.template import TemplateCoach
from mimesis_rl.behavior.openai_client import ChatClient, ChatClientSettings


def build_coach(
    backend: str,
    section: Mapping[str, Any] | None = None,
    *,
    model: Any = None,
    tokenizer: Any = None,
    seed: int = 0,
) -> Coach:
    """A coach from `agent_rl.csd.coach` (+ its `model:`/`llm:` subsection); the model backend reuses
    the trainer's model (adapters off) and tokenizer."""
    section = dict(section or {})
    if backend == "template":
        return TemplateCoach(**section)
    if backend == "model":
        if model is None or tokenizer is None:
            raise ValueError("coach backend 'model' needs the policy model and tokenizer")
        return ModelCoach(model, tokenizer, seed=seed, **section)
    if backend == "llm":
        client_keys = {
            "base_url_env",
            "model_env",
            "api_key_env",
            "base_url",
            "model",
            "timeout_s",
            "max_retries",
            "backoff_s",
        }
        client = ChatClient(
            ChatClientSettings.from_section(
                {k: v for k, v in section.items() if k in client_keys}, where="agent_rl.csd.llm"
            )
        )
        return LLMCoach(client, **{k: v for k, v in section.items() if k not in client_keys})
    raise ValueError(f"agent_rl.csd.coach: unknown backend {backend!r}; known: {', '.join(COACHES)}")
