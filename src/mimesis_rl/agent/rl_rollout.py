"""What TRL's GRPO step gets from the rollout engine: the prompt rows and `rollout_func`.

The dataset is one row per (domain, episode seed); `rollout_func` plays those dialogues through the
rollout engine (the policy as agent, generating on our engine or on TRL's vLLM copy; a frozen user)
and hands TRL the token record (`prompt_ids`, `completion_ids`, `logprobs`, `env_mask`) plus the
per-row episode records the agent trainer reads, and the keyword lists the reward (`rl_reward`) is
computed from: the verifier's `reward`, `success`, `agent_turns`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.runner import ModelRunner, derive_seed
from mimesis_rl.rollout.vllm_runner import VLLMRunner


def prompt_rows(domains: list[str], per_domain: int, offset: int = 2_000_000) -> list[dict[str, Any]]:
    """The GRPO dataset: one row per (domain, episode seed), domains interleaved."""
    return [
        {"prompt": [{"role": "user", "content": f"{d} {offset + i}"}], "domain": d}
        for i in range(per_domain)
        for d in domains
    ]


def parse_prompt(prompt: Any) -> tuple[str, int]:
    """`(domain, seed)` from a dataset prompt; a clear error for anything else."""
    text = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
    parts = str(text).split()
    if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
        raise ValueError(f"agent_rl prompt {text!r}: expected '<domain> <episode seed>'")
    return parts[0], int(parts[1])


def agent_runner(trainer: Any, model: Any, tokenizer: Any, sampling: SamplingParams,
                 seed: int) -> ModelRunner | VLLMRunner:
    """The policy's generator for one rollout: TRL's vLLM copy when the trainer runs in vLLM mode
    (`agent_rl.vllm.use_vllm`, GPUs; TRL syncs its weights before `rollout_func`), else our engine on
    the trainer's own model, seeded per global step."""
    if getattr(trainer, "use_vllm", False):
        limit = int(getattr(model.config, "max_position_embeddings", 0) or 2**31)
        return VLLMRunner(trainer.vllm_generation, tokenizer, sampling, max_context=limit)
    return ModelRunner(model, tokenizer, sampling, adapter="default",
                       seed=derive_seed(seed, "agent_rl", trainer.state.global_step))


def make_rollout_func(
    user_factory: Callable[[str], Any],
    tokenizer: Any,
    sampling: SamplingParams,
    max_turns: int | None,
    seed: int = 0,
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """TRL's `rollout_func(prompts, trainer)`: plays the dialogues and returns rows in prompt order.

    The agent samples at `trainer.temperature`; its sampling seeds change with the global step (and
    with the `#k` copy inside a group), the user's do not (keyed by episode seed): group spread is the
    agent's. Per-row episode records are left on `trainer._pending_episodes` for the trainer.
    """
    from mimesis_rl.envs.multi import MultiDomainEnv
    from mimesis_rl.envs.registry import make_env
    from mimesis_rl.rollout import ModelAgent, run_rollouts

    envs: dict[str, Any] = {}

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        keys = [parse_prompt(p) for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        agent_sampling = replace(
            sampling,
            do_sample=True,
            temperature=float(trainer.temperature),
            top_p=float(getattr(trainer, "top_p", sampling.top_p) or 1.0),
        )
        runner = agent_runner(trainer, model, tokenizer, agent_sampling, seed)
        agent = ModelAgent(runner, name="policy")
        rows: list[dict[str, Any] | None] = [None] * len(keys)
        start = time.perf_counter()
        # Every domain in one lockstep batch: one engine call per side per round, not one per domain.
        for domain in dict.fromkeys(d for d, _ in keys):
            envs.setdefault(domain, make_env(domain, max_turns=max_turns))
        result = run_rollouts(
            MultiDomainEnv(envs, keys, name="agent_rl", description="the RL domains, one batch"),
            agent,
            [user_factory(domain) for domain, _ in keys],
            list(range(len(keys))),
            progress=False,
            desc="rollout",
        )
        trl = result.to_trl()
        records = result.records()
        for i, (domain, _) in enumerate(keys):
            track = result.tracks[i]
            state = result.states[i]
            row = {k: trl[k][i] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask")}
            row.update(
                reward=trl["reward"][i],
                success=trl["success"][i],
                episode_id=trl["episode_id"][i],
                agent_turns=state.agent_turns,
                domain=domain,
                invalid_actions=state.invalid_actions,
                user=result.users[i],
            )
            record = records[i]
            record["env"] = domain
            record["agent_spans"] = [[t.start, t.end] for t in track.turns] if track else []
            record["prompt_len"] = len(row["prompt_ids"])
            row["episode"] = record
            rows[i] = row
        seconds = time.perf_counter() - start
        done = [r for r in rows if r is not None]
        if len(done) != len(keys):
            raise RuntimeError(f"rollout_func: {len(keys) - len(done)} of {len(keys)} rows missing")
        out = {
            k: [r[k] for r in done]
            for k in (
                "prompt_ids",
                "completion_ids",
                "logprobs",
                "env_mask",
                "reward",
                "success",
                "episode_id",
                "agent_turns",
                "domain",
            )
        }
        trainer._pending_episodes = [r["episode"] for r in done]
        agent_tokens = sum(sum(m) for m in out["env_mask"])
        trainer._rollout_stats = {
            "seconds": seconds,
            "agent_tokens": agent_tokens,
            "invalid_actions": sum(r["invalid_actions"] for r in done),
        }
        return out

    return rollout_func

