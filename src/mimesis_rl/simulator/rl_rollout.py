"""sim_rl's GRPO completions on the project's engine instead of TRL's own `generate` (`sim_rl.generation`).

Why: a sim_rl step spent most of its time in transformers' `generate` (static batch, full-vocabulary
top-p sort, LM head copied per row); the engine (`models.inference`: continuous batching, a sampler
that reads a few hundred logits per row) samples the same distribution faster.

What stays as TRL's own generation had it, so rewards and the loss keep their meaning:
- the prompt ids are TRL's (`processing_class(text=prompts)`, the rendered runtime prompt);
- plain sampling at the trainer's temperature / top_k / top_p, up to `max_completion_length` tokens,
  stopping at TRL's `eos_token_ids` (the end-of-turn token kept as the last completion token, as TRL
  keeps it); no format guard, no re-sample: a completion that breaks the format is scored as such;
- the rows come back in prompt order (TRL hands `num_generations` copies of each prompt in a row).

What differs, on purpose:
- sampled from the policy as it is served: LoRA adapter active, dropout off (TRL's generate runs in
  train mode, so with `lora_dropout > 0` its samples come from a dropout-perturbed adapter);
- seeded: row i of the c-th generation at global step s draws from `derive_seed(seed, "sim_rl", s, c,
  process)` and i, so a rerun (or a resume) samples the same completions.

Log-probs: the engine's are log_softmax(logits / T) of the forward that chose each token, in fp32,
the quantity TRL recomputes as `old_per_token_logps`. TRL 1.16 reads `rollout_func` log-probs
(`sampling_per_token_logps`) only with vLLM (`vllm_importance_sampling_correction`, off here: no
vLLM on this path) and for `off_policy_mask_threshold` (unset); without those the loss uses its own
recomputed log-probs exactly as on the `trl` path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mimesis_rl.models.decoding import SamplingParams

GENERATION_BACKENDS = ("engine", "trl")


def grpo_sampling(trainer: Any) -> SamplingParams:
    """TRL's generation settings as the engine's SamplingParams; an option only TRL's generate has
    (min_p, a repetition penalty, extra generation_kwargs) is an error naming `generation: trl`."""
    args = trainer.args
    unsupported = {
        "min_p": getattr(trainer, "min_p", None) is not None,
        "repetition_penalty": float(getattr(trainer, "repetition_penalty", 1.0) or 1.0) != 1.0,
        "generation_kwargs": bool(getattr(args, "generation_kwargs", None)),
    }
    bad = sorted(k for k, v in unsupported.items() if v)
    if bad:
        raise ValueError(f"sim_rl.generation: engine does not implement {bad}; set sim_rl.generation: trl")
    return SamplingParams(
        max_new_tokens=int(trainer.max_completion_length),
        do_sample=True,
        temperature=float(trainer.temperature),
        top_k=int(getattr(trainer, "top_k", 0) or 0),
        top_p=float(getattr(trainer, "top_p", 1.0) or 1.0),
    )


def make_rollout_func(tokenizer: Any, seed: int = 0,
                      adapter: str | None = "default") -> Callable[[list[Any], Any], dict[str, Any]]:
    """TRL's `rollout_func(prompts, trainer)` for sim_rl: one engine call over the generation batch."""
    from mimesis_rl.models.inference.runner import ModelRunner, derive_seed  # torch: only when training

    calls: dict[int, int] = {}  # generations per global step (several if steps_per_generation < accumulation)

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        if not all(isinstance(p, str) for p in prompts):
            raise ValueError("sim_rl's engine rollout expects rendered text prompts (see rl.render_prompts)")
        if getattr(trainer, "use_vllm", False):
            raise ValueError("sim_rl.generation: engine with use_vllm; set sim_rl.generation: trl")
        step = int(trainer.state.global_step)
        call = calls.get(step, 0)
        calls[step] = call + 1
        prompt_ids = [list(ids) for ids in trainer.processing_class(text=list(prompts))["input_ids"]]
        model = trainer.accelerator.unwrap_model(trainer.model)
        runner = ModelRunner(model, tokenizer, grpo_sampling(trainer), adapter=adapter,
                             seed=derive_seed(seed, "sim_rl", step, call, trainer.accelerator.process_index),
                             reuse_cache=False)
        runner.chat.stop_ids = tuple(int(t) for t in trainer.eos_token_ids)  # what TRL's generate stops on
        gens = runner.generate(prompt_ids, list(range(len(prompt_ids))))
        missing = [i for i, g in enumerate(gens) if g is None]
        if missing:
            raise RuntimeError(f"sim_rl rollout: {len(missing)} prompt(s) too long for max_completion_length "
                               f"within the model's positions (rows {missing[:5]})")
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": [list(g.token_ids) for g in gens if g is not None],
            "logprobs": [list(g.logprobs) for g in gens if g is not None],
        }

    return rollout_func
