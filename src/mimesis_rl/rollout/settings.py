"""Rollout knobs (`params.yaml` section `rollout`), typed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mimesis_rl.models.artifact import DEFAULT_SAMPLING
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.settings import from_section


@dataclass(frozen=True)
class RolloutSettings:
    """How model parties decode in `mimesis envs rollout` and evaluation runs.

    Agent:
        agent_max_new_tokens, agent_do_sample, agent_temperature, agent_top_p: the agent's decoding
        (greedy by default: evaluation should not hinge on luck).
    User:
        user_max_new_tokens, user_do_sample, user_temperature, user_top_p: a model-backed user's
        decoding when its own folder names none (sampled: real users vary).
    Models:
        default_base: base folder for prompted users and for adapters that do not say which base.
        (Device and dtype come from the one precision switch, params.yaml `models:`.)
        seed: mixed into every sampling seed.
    Remote users:
        remote: how `openai:` users reach their server (`models.inference.remote.RemoteOptions`).
    """

    agent_max_new_tokens: int = 128
    agent_do_sample: bool = False
    agent_temperature: float = 1.0
    agent_top_p: float = 1.0
    # The project's user sampling (`models.artifact.DEFAULT_SAMPLING`), one field each.
    user_max_new_tokens: int = DEFAULT_SAMPLING.max_new_tokens
    user_do_sample: bool = DEFAULT_SAMPLING.do_sample
    user_temperature: float = DEFAULT_SAMPLING.temperature
    user_top_p: float = DEFAULT_SAMPLING.top_p
    user_max_retries: int = DEFAULT_SAMPLING.max_retries
    user_max_context_tokens: int | None = 512
    default_base: str = "models/base"
    seed: int = 0
    remote: dict[str, Any] | None = None

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> RolloutSettings:
        return from_section(cls, section, "rollout")

    def agent_sampling(self) -> SamplingParams:
        return SamplingParams(
            max_new_tokens=self.agent_max_new_tokens,
            do_sample=self.agent_do_sample,
            temperature=self.agent_temperature,
            top_p=self.agent_top_p,
        )

    def user_sampling(self) -> SamplingParams:
        return SamplingParams(
            max_new_tokens=self.user_max_new_tokens,
            do_sample=self.user_do_sample,
            temperature=self.user_temperature,
            top_p=self.user_top_p,
            max_retries=self.user_max_retries,
        )
