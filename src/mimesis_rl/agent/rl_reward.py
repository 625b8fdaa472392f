"""Agent GRPO's reward, outcome first: an accepted, successful outcome dominates; partial credit breaks ties.

The verifiers pay partial credit (`bargain`: 0.3 + 0.7·share for ANY accepted deal, success only at
share ≥ 0.5), so a reward that is the verifier's alone lets GRPO find cheap accepted offers while greedy
success falls (issue 27). Here

    reward = w_success · success + w_verifier · verifier_reward − turn_cost · agent_turns

as three TRL reward functions whose weights are `GRPOConfig.reward_weights` (summed before the group
normalisation). TRL logs each part per step, unweighted: `rewards/success/mean` (the success rate),
`rewards/verifier/mean` (the verifier's mean reward), `rewards/agent_turns/mean`, each with `/std`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

RewardFunc = Callable[..., list[float]]


@dataclass(frozen=True)
class RewardWeights:
    """`agent_rl.reward`: success (paid for a successful outcome), verifier (times the verifier's own
    reward: the partial credit), turn_cost (subtracted per agent turn)."""

    success: float = 1.0
    verifier: float = 0.2
    turn_cost: float = 0.02

    def __post_init__(self) -> None:
        bad = sorted(k for k, v in (("success", self.success), ("verifier", self.verifier),
                                    ("turn_cost", self.turn_cost)) if v < 0)
        if bad:
            raise ValueError(f"agent_rl.reward: {bad} must be >= 0")
        if self.success == 0 and self.verifier == 0:
            raise ValueError("agent_rl.reward: success and verifier are both 0: nothing would be rewarded")

    def total(self, success: bool | float, verifier: float, agent_turns: int) -> float:
        """One dialogue's reward (the formula above), for reports and checks outside TRL."""
        paid = self.success * float(success) + self.verifier * float(verifier)
        return paid - self.turn_cost * int(agent_turns)

    @property
    def trl_weights(self) -> list[float]:
        """`GRPOConfig.reward_weights`, in the order of `reward_funcs()`."""
        return [self.success, self.verifier, -self.turn_cost]


def success(completions: list[Any], success: Sequence[bool], **_: Any) -> list[float]:
    """1 for a dialogue the verifier calls a success, else 0."""
    return [1.0 if s else 0.0 for s in success]


def verifier(completions: list[Any], reward: Sequence[float], **_: Any) -> list[float]:
    """The verifier's own reward (partial credit included)."""
    return [float(r) for r in reward]


def agent_turns(completions: list[Any], agent_turns: Sequence[int], **_: Any) -> list[float]:
    """Agent turns the dialogue took (weighted by −turn_cost)."""
    return [float(t) for t in agent_turns]


def reward_funcs() -> list[RewardFunc]:
    """The parts TRL scores each dialogue by (keyword lists from `rl_rollout`'s rows); TRL names them
    after the functions in its logs."""
    return [success, verifier, agent_turns]
