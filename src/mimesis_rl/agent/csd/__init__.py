"""CSD, coached on-policy self-distillation: the policy given the coach's notes teaches itself without them.

For each agent turn of a rollout, the coach (`agent.coach`) writes a note from hindsight the agent did
not have. The **teacher** sequence is the student's token sequence with each note spliced in, as
chat-template tokens (a `system` message "Coach note: …"), right before the assistant header of the
turn it coaches; nothing is re-rendered, so the agent's tokens are the same ids in both sequences and
`splice_notes` returns the index map between them. The **student** is the policy on its own sequence.

Per agent token y (sampled by the student), the term is the reverse KL estimated on the sample,
`log s(y) - log t(y)`, with the gradient of TRL's sampled-token self-distillation estimator
(`trl.experimental.sdpo.loss_utils.compute_sampled_token_self_distillation_loss`:
`(log s - log t).detach() * log s`), weighted by λ. Two places to put it (`form` in params):

- `advantage` (default): the teacher is run once per generation batch (no grad) and the term enters
  GRPO's advantages per token, `A_t = A - λ (log s_old(y_t) - log t(y_t))`, with `log s_old` the
  sampling log-probs the rollout already recorded. On-policy (one GRPO iteration) this is the same
  gradient as the loss form (measured: `benchmarks/csd.py`, cosine 1.0) for one teacher forward
  and no second student forward+backward;
- `loss`: `λ · mean((log s - log t).detach() · log s)` added to the loss through the agent trainer's
  `additional_loss` hook (a student forward with grad of its own, plus the teacher forward).

`trainer.CSDTrainer` plugs it into the agent's GRPO trainer by overriding its hooks (see its docstring).

Teacher weights: `live` (the policy as it is) or `ema` (an exponential moving average of the trainable
weights, swapped in for the teacher forward). Control: `shuffle: true` gives each dialogue the notes of
another dialogue (another episode seed). λ = 0 is plain RL (no coach, no teacher forward).

Modules, one job each: `settings` (`CSDSettings`, the `agent_rl.csd` block), `splice` (notes as
chat-template tokens and the student-to-teacher index map), `term` (log-probs at chosen positions and
the sampled-token estimator), `teacher` (the EMA teacher weights), `driver` (`CSD`: coaching, splicing,
the teacher forward and the two forms, `build_csd`) and `trainer` (`CSDTrainer`). Nothing is imported
here: import from the module that holds a name.
"""
