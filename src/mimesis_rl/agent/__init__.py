"""Agents trained against frozen users: warm start by cloning, multi-turn GRPO, CSD.

- `agent.data`: the scripted agents' winning transcripts as chat examples (behaviour cloning).
- `agent.sft`: `agent_sft` — TRL SFTTrainer, LoRA, loss on agent turns; evaluation per domain.
- `agent.rl`: `AgentGRPOTrainer` (TRL GRPOTrainer + the rollout engine as `rollout_func`, env mask,
  verifier reward − turn cost, `extra_loss` hook) and `train_agent_rl`.
- `agent.users`: training users on the policy's own base (prompted base, frozen simulator adapter).
- `agent.coach`, `agent.csd`: coaching notes and the CSD distillation term (plugged into the hook).
- `agent.artifact`, `agent.registry`: the agent folder (mimesis.json role agent) and `mimesis-agent`.

Submodules are imported on use: TRL and torch load only where training happens.
"""
