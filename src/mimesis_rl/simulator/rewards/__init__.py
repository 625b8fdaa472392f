"""The simulator's RL rewards, one file each, all with TRL's reward-function signature.

`build_rewards` turns the weights in params.yaml (`sim_rl.rewards`) into the parallel lists
`reward_funcs` / `reward_weights` that `GRPOTrainer` takes; a weight of 0 leaves a reward out.
`completion_prefix` is what the prompt forced before the completion (`<think>`: the simulator's
generation prompt ends in it at inference, so GRPO's does too); every reward parses prefix +
completion, i.e. the turn as the runtime parses it. `outcomes_alone`: on a row where an outcome
reward applies (a pending proposal: `decision`; a question about a slot: `answers`), that outcome is
the whole reward, so style rewards cannot outvote the decision within a GRPO group.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mimesis_rl.simulator.rewards.answers import make_answers_reward
from mimesis_rl.simulator.rewards.common import RewardFunc, column, completion_text, parse_completions
from mimesis_rl.simulator.rewards.decision import decision_score, make_decision_reward
from mimesis_rl.simulator.rewards.disclosure import disclosure_score, make_paced_disclosure_reward
from mimesis_rl.simulator.rewards.fidelity import PatternPredictor, make_pattern_fidelity_reward, soft_jaccard
from mimesis_rl.simulator.rewards.goal import contradictions, make_goal_consistency_reward, slot_vocabulary
from mimesis_rl.simulator.rewards.pursuit import make_goal_pursuit_reward, pursuit_score
from mimesis_rl.simulator.rewards.role import make_role_adherence_reward
from mimesis_rl.simulator.rewards.wellformed import format_score, make_format_reward

if TYPE_CHECKING:
    from mimesis_rl.simulator.discriminator import TurnDiscriminator

REWARD_NAMES = ("pattern_fidelity", "realism", "goal_consistency", "goal_pursuit", "paced_disclosure",
                "role_adherence", "format", "decision", "answers")
OUTCOME_REWARDS = ("decision", "answers")


def build_rewards(
    weights: Mapping[str, float],
    *,
    predictor: PatternPredictor | None = None,
    discriminator: TurnDiscriminator | None = None,
    vocabulary: Mapping[str, set[str]] | None = None,
    length_range: tuple[float, float] = (1, 60),
    max_words: int = 80,
    completion_prefix: str = "",
    decide_by_reasoning: bool = False,
    outcomes_alone: bool = False,
) -> tuple[list[RewardFunc], list[float]]:
    """(reward functions, weights) for the rewards with a non-zero weight; `decide_by_reasoning`: the
    decision reward reads a reply whose message says neither by its reasoning's verdict;
    `outcomes_alone`: the other rewards say nothing (None) on rows that ask for an outcome."""
    unknown = sorted(set(weights) - set(REWARD_NAMES))
    if unknown:
        raise ValueError(f"sim_rl.rewards: unknown reward(s) {unknown}; known: {', '.join(REWARD_NAMES)}")
    funcs: list[RewardFunc] = []
    out_weights: list[float] = []
    for name in REWARD_NAMES:
        weight = float(weights.get(name, 0.0))
        if weight == 0.0:
            continue
        if name == "pattern_fidelity":
            if predictor is None:
                raise ValueError("pattern_fidelity has a weight but no labeler was given")
            funcs.append(make_pattern_fidelity_reward(predictor))
        elif name == "realism":
            if discriminator is None:
                raise ValueError("realism has a weight but no discriminator was given")
            from mimesis_rl.simulator.rewards.realism import make_realism_reward

            funcs.append(make_realism_reward(discriminator))
        elif name == "goal_consistency":
            funcs.append(make_goal_consistency_reward(vocabulary or {}))
        elif name == "goal_pursuit":
            funcs.append(make_goal_pursuit_reward())
        elif name == "paced_disclosure":
            funcs.append(make_paced_disclosure_reward())
        elif name == "role_adherence":
            funcs.append(make_role_adherence_reward(max_words))
        elif name == "decision":
            funcs.append(make_decision_reward(decide_by_reasoning))
        elif name == "answers":
            if predictor is None:
                raise ValueError("answers has a weight but no labeler was given (it reads human withholding)")
            funcs.append(make_answers_reward(predictor))
        else:
            funcs.append(make_format_reward(length_range))
        if outcomes_alone and name not in OUTCOME_REWARDS:
            funcs[-1] = off_outcome_rows(funcs[-1], decisions=bool(weights.get("decision", 0.0)),
                                         questions=bool(weights.get("answers", 0.0)))
        out_weights.append(weight)
    if completion_prefix:
        funcs = [with_prefix(f, completion_prefix) for f in funcs]
    return funcs, out_weights


def off_outcome_rows(func: RewardFunc, *, decisions: bool = True, questions: bool = True) -> RewardFunc:
    """`func`, returning None (does not apply) on the rows where an outcome reward applies: a pending
    proposal (`decisions`: the decision reward is on) or a question about a slot (`questions`: the
    answers reward is on). A row whose outcome reward is off keeps every other reward."""

    @functools.wraps(func)
    def gated(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        n = len(completions)
        outcome = [(decisions and bool(d)) or (questions and (a or "[]") != "[]")
                   for d, a in zip(column(kwargs, "decision", n, ""), column(kwargs, "asked_slots", n, "[]"),
                                   strict=True)]
        scores = func(prompts, completions, **kwargs)
        return [None if o else s for s, o in zip(scores, outcome, strict=True)]

    return gated


def with_prefix(func: RewardFunc, prefix: str) -> RewardFunc:
    """`func` judging `prefix + completion` (plain-text completions, as GRPO gives for text prompts)."""

    @functools.wraps(func)
    def wrapped(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        return func(prompts, [prefix + completion_text(c) for c in completions], **kwargs)

    return wrapped


__all__ = [
    "OUTCOME_REWARDS", "PatternPredictor", "REWARD_NAMES", "RewardFunc", "build_rewards", "completion_text",
    "contradictions", "decision_score", "disclosure_score", "format_score", "make_answers_reward",
    "make_decision_reward", "make_format_reward", "make_goal_consistency_reward",
    "make_goal_pursuit_reward", "make_paced_disclosure_reward", "make_pattern_fidelity_reward",
    "make_role_adherence_reward", "parse_completions", "pursuit_score", "slot_vocabulary",
    "soft_jaccard", "with_prefix",
]
