"""Batched multi-turn rollouts: rollout logic only (who speaks when, transcripts, TRL fields).

`run_rollouts(env, ModelAgent(runner), users, seeds)` plays N dialogues in lockstep, one batched
`generate` per side per round; users are `UserSimulator`s (the one LM user runtime), scripted
users, or a mix. `RolloutResult.to_trl()` is what a GRPOTrainer `rollout_func` returns;
`RolloutResult.write(path)` writes the transcripts (JSONL). Model inference (generation, KV
reuse, the shared model pool) is `mimesis_rl.models.inference`.
"""

from mimesis_rl.models.inference import (
    ChatFormat,
    ChatTrack,
    Generation,
    ModelRunner,
    SamplingParams,
    generate_batch,
)
from mimesis_rl.rollout.agent import ModelAgent
from mimesis_rl.rollout.engine import RolloutResult, run_rollouts
from mimesis_rl.rollout.mixed import MixedUsers

__all__ = [
    "ChatFormat",
    "ChatTrack",
    "Generation",
    "MixedUsers",
    "ModelAgent",
    "ModelRunner",
    "RolloutResult",
    "SamplingParams",
    "generate_batch",
    "run_rollouts",
]
