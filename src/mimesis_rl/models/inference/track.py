"""The token record of one party in one dialogue: what it saw, what it generated, with what log-prob.

`prompt_ids + completion_ids` is exactly the sequence the party's model conditioned on, so a
trainer can re-forward it and get the same numbers. `mask` is 1 on tokens this party generated and
0 on tokens that came from outside (the other party's messages, template glue); `logprobs` holds
the generating policy's log-prob on mask-1 tokens and 0.0 elsewhere. This is the shape TRL's
GRPOTrainer takes from a `rollout_func` (`completion_ids`, `logprobs`, `env_mask`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.models.inference.generation import Generation
from mimesis_rl.models.inference.kvcache import RowCache


@dataclass
class TurnTokens:
    """Where one generated turn sits in `completion_ids` and how it ended."""

    start: int
    end: int
    stopped: bool
    mean_logprob: float | None

    @property
    def n_tokens(self) -> int:
        return self.end - self.start


@dataclass
class ChatTrack:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turns: list[TurnTokens] = field(default_factory=list)
    messages_seen: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    kv: RowCache | None = field(default=None, repr=False, compare=False)  # keys/values of a context prefix

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def add_generated(self, gen: Generation) -> None:
        self.kv = gen.cache
        start = len(self.completion_ids)
        self.completion_ids += gen.token_ids
        self.mask += [1] * len(gen.token_ids)
        self.logprobs += gen.logprobs
        mean = sum(gen.logprobs) / len(gen.logprobs) if gen.logprobs else None
        self.turns.append(TurnTokens(start, len(self.completion_ids), gen.stopped, mean))

    def add_external(self, ids: list[int]) -> None:
        self.completion_ids += ids
        self.mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)

    def trl_fields(self, end_of_turn_id: int) -> dict[str, Any]:
        """prompt/completion ids, logprobs and env_mask for one sample, cut after the last generated token.

        Trailing tokens from the other side carry no loss and would only make TRL think the
        completion was truncated; a track with no generated token gets one masked end-of-turn
        token, because TRL reads `completion_ids[-1]`.
        """
        cut = self.turns[-1].end if self.turns else 0
        completion, mask, logprobs = self.completion_ids[:cut], self.mask[:cut], self.logprobs[:cut]
        if not completion:
            completion, mask, logprobs = [end_of_turn_id], [0], [0.0]
        return {
            "prompt_ids": list(self.prompt_ids),
            "completion_ids": completion,
            "logprobs": logprobs,
            "env_mask": mask,
        }
