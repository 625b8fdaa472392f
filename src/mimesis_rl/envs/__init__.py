"""Interactive task environments, scripted users and agents, and the simulator panel.

Contracts live in `envs.protocols` (Environment, UserSide, AgentSide, EpisodeState, Observation);
`envs.task_env.TaskEnv` is the shared machinery of the built-in domains; `envs.loop.play` runs
dialogues in lockstep.
"""

from mimesis_rl.envs.loop import play, summarize
from mimesis_rl.envs.protocols import (
    Action,
    ActionSpec,
    AgentSide,
    Environment,
    EpisodeState,
    Observation,
    ParsedMessage,
    SessionSpec,
    StepResult,
    TraceTurn,
    UserReply,
    UserSide,
    Verdict,
)

__all__ = [
    "Action",
    "ActionSpec",
    "AgentSide",
    "Environment",
    "EpisodeState",
    "Observation",
    "ParsedMessage",
    "SessionSpec",
    "StepResult",
    "TraceTurn",
    "UserReply",
    "UserSide",
    "Verdict",
    "play",
    "summarize",
]
