"""Batched multi-turn rollouts: agent and simulator on one shared base model, records for TRL.

`run_rollouts(env, ModelAgent(runner), users, seeds)` plays N dialogues in lockstep, one batched
`generate` per side per round; `RolloutResult.to_trl()` is what a GRPOTrainer `rollout_func`
returns; `RolloutResult.write(path)` writes the transcripts (JSONL).
"""

from mimesis_rl.rollout.agent import ModelAgent
from mimesis_rl.rollout.chat import ChatFormat
from mimesis_rl.rollout.engine import RolloutResult, run_rollouts
from mimesis_rl.rollout.generation import Generation, SamplingParams, generate_batch
from mimesis_rl.rollout.mixed import MixedUsers
from mimesis_rl.rollout.runner import ModelRunner
from mimesis_rl.rollout.track import ChatTrack
from mimesis_rl.rollout.user import ModelUser

__all__ = [
    "ChatFormat",
    "ChatTrack",
    "Generation",
    "MixedUsers",
    "ModelAgent",
    "ModelRunner",
    "ModelUser",
    "RolloutResult",
    "SamplingParams",
    "generate_batch",
    "run_rollouts",
]
