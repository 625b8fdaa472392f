"""The served simulator as an environment for RL frameworks outside this project.

- `SimulatorClient`: the HTTP client (httpx only) for the stateless chat endpoint: give it the
  dialogue from the agent's side, get the user's next message and whether they left.
- `MimesisInteraction` (`adapters.verl`): a verl `BaseInteraction` (multi-turn rollouts); verl itself
  is optional — without it the class keeps the same interface.
- `ServedUser` (`adapters.user`): the server as a user side (`envs.protocols.UserSide`) of the
  project's rollout engine.
- `make_rollout_func` (`adapters.trl`): a TRL GRPOTrainer `rollout_func` that plays whole dialogues on
  the rollout engine: the trainer's model speaks as the agent (`rollout.ModelAgent`), the server as
  the user (`ServedUser`); `env_mask` keeps the loss on the agent's tokens.

All of them talk to `mimesis serve` over HTTP only, so the trainer and the simulator can live on
different machines and the simulator's reasoning never reaches the agent's process.
"""

from __future__ import annotations

from mimesis_rl.serve.adapters.client import Goal, SimulatorClient, SimulatorError, UserTurn

__all__ = ["Goal", "SimulatorClient", "SimulatorError", "UserTurn"]
