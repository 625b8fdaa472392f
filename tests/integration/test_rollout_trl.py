"""The engine's record goes straight into TRL's GRPOTrainer as a `rollout_func` (one real step)."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from rollout_support import LeavingUser, WordEnv, load_tiny, one_thread, tiny_dir  # noqa: F401

from mimesis_rl.rollout import ModelAgent, ModelRunner, SamplingParams, run_rollouts

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_grpo_step_on_engine_rollouts(tiny_dir, tmp_path, monkeypatch):  # noqa: F811
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = load_tiny(tiny_dir)
    seen: dict[str, list] = {}

    def rollout_func(prompts, trainer):
        seeds = [int(p[-1]["content"].split()[-1]) for p in prompts]
        runner = ModelRunner(trainer.model, tok, SamplingParams(max_new_tokens=6, do_sample=True), seed=7)
        out = run_rollouts(
            WordEnv(max_turns=3), ModelAgent(runner), LeavingUser(), seeds, progress=False
        ).to_trl()
        seen.update(out)
        return out

    def env_reward(completions, reward, **kwargs):  # the verifier's reward, forwarded by TRL
        return [float(r) + 0.1 * len(c[0]["content"]) / 100 for r, c in zip(reward, completions, strict=True)]

    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"seed {s}"}]} for s in (1, 2, 3, 4)])
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=1,
        max_completion_length=256,
        learning_rate=1e-3,
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        temperature=1.0,
        beta=0.0,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=env_reward,
        args=args,
        train_dataset=data,
        processing_class=tok,
        rollout_func=rollout_func,
    )
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()
    after = list(model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True)), "no parameter moved"
    logged = trainer.state.log_history[0]
    # TRL counted only agent tokens (env_mask) as completion length.
    mean_agent_tokens = sum(sum(m) for m in seen["env_mask"]) / len(seen["env_mask"])
    assert logged["completions/mean_length"] == pytest.approx(mean_agent_tokens)
