"""Agents trained against frozen users: warm start by cloning, multi-turn GRPO, CSD.

- `agent.data`: the scripted agents' winning transcripts as chat examples (behaviour cloning).
- `agent.sft`: `agent_sft` — TRL SFTTrainer, LoRA, loss on agent turns; evaluation per domain.
- `agent.grpo`: `AgentGRPOTrainer` (TRL GRPOTrainer for whole dialogues: episodes, per-step metrics,
  the `additional_loss` hook).
- `agent.rl`: `agent_rl` — the rollout engine as `rollout_func`, env mask, verifier reward − turn
  cost, `build_trainer` and `train_agent_rl`.
- Both stages build their TRL configs, checkpoints and launches with `mimesis_rl.training`.
- `agent.users`: training users on the policy's own base (prompted base, frozen simulator adapter).
- `agent.coach`, `agent.csd`: coaching notes and the CSD distillation term (`CSDTrainer`, a subclass
  of `AgentGRPOTrainer` overriding its hooks).
- `agent.artifact`, `agent.registry`: the agent folder (mimesis.json role agent) and `mimesis-agent`.

Submodules are imported on use: TRL and torch load only where training happens.
"""
