"""Agent GRPO: step time split rollout / teacher forward / optimisation, and the rollout engine vs the
naive per-dialogue loop at 16 dialogues, in one run.

    python -m benchmarks.agent [--model models/base] [--sft models/agent/sft] [--steps 2] [--csd]
                               [--dialogues 16] [--threads 2] [--skip-engine]

GRPO step: `AgentGRPOTrainer` (the stage's trainer) over the demo base, the agent = the SFT adapter
(`--sft`; else a fresh LoRA), the user = the assistant-prompted base on the same weights, the demo's
`agent_rl` knobs (domains, turns, tokens, batch). Per step: rollout (the engine playing the batch's
dialogues), KL-to-SFT forward (logged metric), teacher forward (CSD, `agent.csd.trainer.CSDTrainer`, with
`--csd`), optimisation = the rest of the step (TRL's
old-logps bookkeeping, forward + backward + optimizer step). CPU seconds of this process are
reported beside wall seconds: on a shared machine they say more than the wall clock.

Engine vs naive: `benchmarks.rollout.throughput` (same 16 dialogues, same model, greedy both
sides, 12 simulator-adapter users + 4 scripted) run in this same process, right after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from benchmarks._common import RESULTS_DIR, ROLLOUT_SETTING_KEYS, cpu_model, peak_rss_mib, write_result

ROOT = Path(__file__).resolve().parents[1]




def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _policy(model_dir: Path, sft: Path | None, tmp: Path) -> Path:
    """An agent folder to start from: the given SFT agent, else a fresh LoRA saved as one."""
    if sft is not None:
        return sft
    from peft import get_peft_model

    from mimesis_rl.agent.artifact import save_agent
    from mimesis_rl.models.config import LoraSettings
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.loading import load_base
    from mimesis_rl.models.lora import peft_lora_config

    model, tok = load_base(model_dir, dtype=torch.float32, device="cpu")
    peft = get_peft_model(model, peft_lora_config(LoraSettings(r=16, alpha=32)))
    return save_agent(peft, tok, tmp / "sft", model_dir, SamplingParams(max_new_tokens=64), "benchmark")


def grpo_steps(model_dir: Path, sft: Path, steps: int, csd: bool) -> dict[str, Any]:
    from mimesis_rl.agent.rl import train_agent_rl
    from mimesis_rl.config import load_params
    from tasks.agent_rl import settings

    params = load_params(ROOT / "params.yaml", "demo")
    s, _, _ = settings(params, "assistant")
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        s = replace(
            s.with_options(max_steps=steps),
            sft_dir=str(sft),
            base_model=str(model_dir),
            eval_seeds=0,
            output_dir=f"{tmp}/out",
            report_dir=f"{tmp}/rep",
            checkpoint_dir=f"{tmp}/ck",
            csd={"enabled": True, "lam": 0.05} if csd else {"enabled": False},
        )
        cpu0, wall0 = _cpu_seconds(), time.perf_counter()
        metrics = train_agent_rl(s, seed=0)
        wall, cpu = time.perf_counter() - wall0, _cpu_seconds() - cpu0
    timing = metrics["mean_seconds"]
    step = timing.get("step", 0.0)
    rollout, kl, teacher = (
        timing.get("rollout", 0.0),
        timing.get("kl_forward", 0.0),
        timing.get("teacher_forward", 0.0),
    )
    return {
        "settings": {
            k: getattr(s, k) if hasattr(s, k) else s.option(k)
            for k in ROLLOUT_SETTING_KEYS
        },
        "steps": metrics["steps"],
        "csd": csd,
        "mean_step_seconds": round(step, 2),
        "split_seconds": {
            "rollout": round(rollout, 2),
            "kl_to_sft_forward": round(kl, 2),
            "teacher_forward": round(teacher, 2) if csd else None,
            "optimisation": round(step - rollout - kl - teacher, 2),
        },
        "split_share": {
            k: round(v / step, 3) if step else None
            for k, v in (
                ("rollout", rollout),
                ("kl_to_sft_forward", kl),
                ("teacher_forward", teacher),
                ("optimisation", step - rollout - kl - teacher),
            )
        },
        "wall_seconds_total": round(wall, 1),
        "cpu_seconds_total": round(cpu, 1),
        "reward_first_last": [metrics["first_reward"], metrics["last_reward"]],
    }


def eval_batching(model_dir: Path, sft: Path, seeds: int, rounds: int = 2) -> dict[str, Any]:
    """The agent's greedy evaluation (demo `agent_rl` domains, the assistant-prompted user): one
    lockstep batch over all domains (`agent.evaluate`) vs one run per domain, interleaved A/B."""
    from mimesis_rl.agent.evaluate import evaluate
    from mimesis_rl.agent.rl_trainer import load_policy, training_users
    from mimesis_rl.config import load_params
    from mimesis_rl.models.inference.runner import ModelRunner
    from mimesis_rl.rollout import ModelAgent
    from mimesis_rl.training.config import precision_kwargs
    from tasks.agent_rl import settings

    s, _, _ = settings(load_params(ROOT / "params.yaml", "demo"), "assistant")
    bf16 = bool(precision_kwargs(s.device, s.bf16).get("bf16"))  # as the stage decides it
    model, tok = load_policy(sft, model_dir, bf16=bf16)
    factory = training_users(replace(s, base_model=str(model_dir)), model, tok)
    agent = ModelAgent(ModelRunner(model, tok, s.generation, adapter="default", seed=0))
    domains, seed_list = s.domain_list, [10**7 + i for i in range(seeds)]
    times: dict[str, list[float]] = {"batched": [], "per_domain": []}
    results: dict[str, Any] = {}
    for _ in range(rounds):
        for mode in ("per_domain", "batched"):
            start = time.perf_counter()
            if mode == "batched":
                out = evaluate(agent, {s.user: factory}, domains, seed_list, s.max_turns)[s.user]
            else:
                out = {d: evaluate(agent, {s.user: factory}, [d], seed_list, s.max_turns)[s.user][d]
                       for d in domains}
            times[mode].append(time.perf_counter() - start)
            results[mode] = {d: (out[d]["success_rate"], out[d]["mean_reward"]) for d in domains}
    best = {k: min(v) for k, v in times.items()}
    return {
        "domains": domains,
        "seeds_per_domain": seeds,
        "user": s.user,
        "seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "speedup_best_of": round(best["per_domain"] / best["batched"], 2),
        "same_scores": results["batched"] == results["per_domain"],
    }


def _carry_skipped(result: dict[str, Any]) -> None:
    """Parts this run skipped keep their last measurement, marked with the run that took it."""
    path = RESULTS_DIR / "agent.json"
    if not path.exists():
        return
    previous = json.loads(path.read_text())
    for part in ("eval_batching", "grpo_step", "engine_vs_naive", "grpo_step_from_the_stage"):
        if part not in result and part in previous:
            carried = dict(previous[part])
            carried.setdefault("measured_in_run", previous.get("time"))
            carried.setdefault("load_avg_of_that_run", previous.get("load_avg_1_5_15_start"))
            result[part] = carried


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.agent", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "base"))
    parser.add_argument("--sft", default=None, help="agent_sft folder to start from (default: a fresh LoRA)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--csd", action="store_true", help="add the CSD term (mimesis_rl.agent.csd)")
    parser.add_argument("--dialogues", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--eval-seeds", type=int, default=0,
                        help="> 0: also time the agent evaluation batched over domains vs per domain "
                        "(needs --sft), this many seeds per domain")
    parser.add_argument("--only-eval", action="store_true", help="skip the GRPO step and the engine part")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model_dir = Path(args.model)
    if not (model_dir / "config.json").exists():
        raise SystemExit(
            f"--model {model_dir}: not a model folder (build it with `python -m tasks.base_model`)"
        )
    load_start = [round(x, 2) for x in os.getloadavg()]
    result: dict[str, Any] = {
        "cpu_model": cpu_model(),
        "threads": args.threads,
        "model": str(model_dir),
        "load_avg_1_5_15_start": load_start,
    }
    if args.eval_seeds:
        if not args.sft:
            raise SystemExit("--eval-seeds needs --sft (an agent_sft folder)")
        result["eval_batching"] = eval_batching(model_dir, Path(args.sft), args.eval_seeds)
        result["load_avg_after_eval"] = [round(x, 2) for x in os.getloadavg()]
    if not args.only_eval:
        with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
            sft = _policy(model_dir, Path(args.sft) if args.sft else None, Path(tmp))
            result["sft"] = args.sft or "fresh LoRA (r=16)"
            result["grpo_step"] = grpo_steps(model_dir, sft, args.steps, args.csd)
        result["load_avg_after_grpo"] = [round(x, 2) for x in os.getloadavg()]
    if not args.skip_engine and not args.only_eval:
        from benchmarks.rollout import throughput

        ns = argparse.Namespace(dialogues=args.dialogues, env="bargain", max_turns=4, max_new_tokens=64)
        cpu0 = _cpu_seconds()
        engine = throughput(model_dir, ns, "auto")
        engine["cpu_seconds"] = round(_cpu_seconds() - cpu0, 1)
        result["engine_vs_naive"] = {
            k: engine[k] for k in ("speedup", "aim_speedup", "identical_transcripts", "cpu_seconds")
        }
        result["engine_vs_naive"].update(
            {
                "engine_seconds": engine["engine"]["seconds"],
                "naive_seconds": engine["naive"]["seconds"],
                "dialogues": args.dialogues,
                "env": "bargain",
                "dtype": "auto (demo)",
            }
        )
    _carry_skipped(result)
    result["load_avg_1_5_15_end"] = [round(x, 2) for x in os.getloadavg()]
    result["peak_rss_mib"] = peak_rss_mib()
    result["noise"] = (
        "2-core machine shared with other engineers' jobs: wall times scale with the load "
        "average; shares within a step and the engine/naive ratio are measured back to back"
    )
    write_result("agent", result)


if __name__ == "__main__":
    main(sys.argv[1:])
