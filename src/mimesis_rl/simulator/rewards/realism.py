"""Realism: the discriminator's probability that the message was written by a real user."""

from __future__ import annotations

from typing import Any

from mimesis_rl.simulator.discriminator import TurnDiscriminator
from mimesis_rl.simulator.rewards.common import RewardFunc, column, named, parse_completions


def make_realism_reward(discriminator: TurnDiscriminator) -> RewardFunc:
    """P(real) of each parsed message given the agent's last message; 0 for rejected outputs."""

    @named("realism")
    def realism(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        parsed = parse_completions(completions)
        contexts = [c or "" for c in column(kwargs, "agent_message", len(parsed), "")]
        ok = [i for i, t in enumerate(parsed) if t.ok]
        out: list[float | None] = [0.0] * len(parsed)
        if ok:
            probs = discriminator.predict_real([contexts[i] for i in ok], [parsed[i].message for i in ok])
            for i, p in zip(ok, probs, strict=True):
                out[i] = float(p)
        return out

    return realism
