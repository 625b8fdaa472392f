"""Agents trained against frozen users: warm start by cloning, multi-turn GRPO, CSD.

- `agent.data`: the scripted agents' winning transcripts as chat examples (behaviour cloning).
- `agent.sft`: `agent_sft` — TRL SFTTrainer, LoRA, loss on agent turns; evaluation per domain.
- `agent.grpo`: `AgentGRPOTrainer` (TRL GRPOTrainer for whole dialogues: episodes, per-step metrics,
  the `additional_loss` hook).
- `agent_rl`, by job: `agent.rl_settings` (`AgentRLSettings`), `agent.rl_rollout` (the prompt rows, the
  rollout engine as `rollout_func`, env mask, verifier reward − turn cost), `agent.rl_trainer`
  (`build_trainer`: policy, training user, TRL config) and `agent.rl` (the stage: `train_agent_rl`).
- Both stages build their TRL configs, checkpoints and launches with `mimesis_rl.training`.
- `agent.users`: training users on the policy's own base (prompted base, frozen simulator adapter).
- `agent.coach` (package): coaching notes — contexts, the leak guard, the template/model/llm backends.
- `agent.csd` (package): the CSD distillation term — settings, note splicing, the term, the teacher,
  the driver and `csd.trainer.CSDTrainer` (a subclass of `AgentGRPOTrainer` overriding its hooks).
- `agent.artifact`, `agent.registry`: the agent folder (mimesis.json role agent) and `mimesis-agent`.

Submodules are imported on use: TRL and torch load only where training happens.
"""
