"""Role adherence: the simulator is the user, so it must not sound like an assistant or step out of
the role ("As an AI...", offering help, long lists, refusing to play)."""

from __future__ import annotations

from typing import Any

from mimesis_rl.simulator.rewards.common import RewardFunc, named, parse_completions
from mimesis_rl.simulator.roleplay import role_score


def make_role_adherence_reward(max_words: int = 80) -> RewardFunc:
    """1.0 for a user-like message; each assistant-like trait costs; a refusal to play costs all."""

    @named("role_adherence")
    def role_adherence(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        return [role_score(t.message, max_words) if t.ok else 0.0 for t in parse_completions(completions)]

    return role_adherence
