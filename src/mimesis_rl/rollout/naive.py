"""The reference the engine is checked and benchmarked against: each dialogue alone, and the agent
with one plain `model.generate` call (batch of one, no padding, stock decoding) per turn.

`NaiveAgent` shares only the chat-template arithmetic (`ChatFormat`) with the engine, so the
equivalence tests compare batching, padding, drop-out and the recorded log-probs against an
independent implementation. The user side is whatever `UserSide` is given (a model user is always
the one runtime, `UserSimulator`; for the naive baseline give it a runner with `reuse_cache=False`),
called with one session at a time. Greedy decoding gives the same transcripts as the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from peft import PeftModel

from mimesis_rl.envs.loop import play
from mimesis_rl.envs.protocols import (
    AgentSide,
    Environment,
    EpisodeState,
    Observation,
    UserSide,
)
from mimesis_rl.models.inference.runner import ModelRunner, derive_seed
from mimesis_rl.models.lora import active_adapter
from mimesis_rl.rollout.engine import _UniqueEpisodes


def _generate_one(runner: ModelRunner, ids: list[int], key: str) -> tuple[list[int], bool]:
    """One plain `generate` call for one context; returns (new ids up to the stop token, stopped)."""
    sampling = runner.sampling
    kwargs: dict[str, Any] = {"do_sample": sampling.do_sample}
    if sampling.do_sample:
        torch.manual_seed(derive_seed(runner.seed, key))
        kwargs.update(temperature=sampling.temperature, top_k=sampling.top_k or None, top_p=sampling.top_p)
    model = runner.model
    if runner.adapter is not None:
        weights = active_adapter(model, runner.adapter)
    elif isinstance(model, PeftModel):
        weights = model.disable_adapter()
    else:
        weights = torch.inference_mode()
    with weights, torch.inference_mode():
        input_ids = torch.tensor([ids], device=model.device)
        out = model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=list(runner.chat.stop_ids),
            pad_token_id=runner.chat.pad_id,
            use_model_defaults=False,
            **kwargs,
        )
    new = out[0, len(ids) :].tolist()
    end = next((i + 1 for i, tok in enumerate(new) if tok in runner.chat.stop_ids), None)
    return (new[:end], True) if end is not None else (new, False)


class NaiveAgent:
    """AgentSide that answers one observation at a time, token ids carried over between turns."""

    def __init__(self, runner: ModelRunner, name: str = "naive-agent") -> None:
        self.runner, self.name = runner, name
        self.ids: dict[str, list[int]] = {}
        self.seen: dict[str, int] = {}
        self.turns: dict[str, int] = {}

    def act(self, observations: Sequence[Observation]) -> list[str]:
        out = []
        for obs in observations:
            chat = self.runner.chat
            if obs.episode_id not in self.ids:
                self.ids[obs.episode_id] = chat.prompt_ids(obs.messages)
                self.turns[obs.episode_id] = 0
            else:
                self.ids[obs.episode_id] += chat.continuation_ids(obs.messages[self.seen[obs.episode_id] :])
            ids = self.ids[obs.episode_id]
            turn = self.turns[obs.episode_id]
            if not self.runner.fits(len(ids)):  # same rule as the engine: no room, empty message
                self.seen[obs.episode_id] = len(obs.messages)
                out.append("")
                continue
            new, stopped = _generate_one(self.runner, ids, f"agent:{obs.episode_id}:{turn}")
            ids += new if stopped else [*new, chat.end_of_turn_id]
            self.seen[obs.episode_id] = len(obs.messages) + 1
            self.turns[obs.episode_id] = turn + 1
            out.append(chat.decode(new))
        return out


def play_naive(
    env: Environment, agent: AgentSide, users: UserSide | Sequence[UserSide], seeds: Sequence[int]
) -> list[EpisodeState]:
    """Each dialogue alone, in seed order, with the same episode ids as `run_rollouts`."""
    seeds = list(seeds)
    sides = list(users) if isinstance(users, Sequence) else [users] * len(seeds)
    states = []
    wrapped = _UniqueEpisodes(env)  # one wrapper: repeated seeds count up as in the engine
    for seed, side in zip(seeds, sides, strict=True):
        states += play(wrapped, agent, side, [seed])  # type: ignore[arg-type]
    return states
