"""CSD cost and the choice of form: one `agent_rl` step, plain vs CSD (advantage form, loss form).

    python -m benchmarks csd                     # or: python -m benchmarks.csd --steps 2 --user …

Same process, same seeds, variants interleaved step by step (plain, advantage, loss, plain, …) so
machine load hits them alike. The policy is the base model with a fresh LoRA `default` adapter (the
SFT agent when `models/agent/sft` exists): the step's cost does not depend on what it learned.
Reports per variant the step time split into rollout / teacher forward / the rest (optimisation),
the ratio CSD step / plain step, and for the advantage form how far the rollout's recorded
log-probs (which it uses as the student's) are from a fresh forward on the same tokens.
Writes benchmarks/results/csd.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks._common import ROLLOUT_SETTING_KEYS, cpu_model, write_result

VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {"enabled": False},
    "csd_advantage": {"enabled": True, "lam": 0.05, "form": "advantage"},
    "csd_loss": {"enabled": True, "lam": 0.05, "form": "loss"},
}




def _policy(base: str, sft: Path, bf16: bool) -> tuple[Any, Any]:
    import torch
    from peft import LoraConfig, get_peft_model

    from mimesis_rl.agent.rl_trainer import load_policy
    from mimesis_rl.models.loading import load_base

    if (sft / "mimesis.json").exists():
        return load_policy(sft, base, bf16)
    model, tok = load_base(base, dtype=torch.float32, device="cpu")
    lora = LoraConfig(
        r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM"
    )
    return get_peft_model(model, lora, adapter_name="default"), tok


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks csd")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--user", default="prompted:assistant")
    parser.add_argument("--base", default="models/base")
    parser.add_argument("--sft", default="models/agent/sft")
    parser.add_argument("--domains", default=None, help="comma list (default: params agent_rl.domains)")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--num-generations", type=int, default=None)
    parser.add_argument("--max-turns", type=int, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch

    from mimesis_rl.agent.csd.term import token_logps
    from mimesis_rl.agent.rl_settings import AgentRLSettings
    from mimesis_rl.agent.rl_trainer import build_trainer

    section = dict(yaml.safe_load(Path("params.yaml").read_text())["agent_rl"])
    for key in ("variants", "registry", "csd"):
        section.pop(key, None)
    section.update(
        user=args.user,
        max_steps=args.steps,
        device="cpu",
        bf16=False,
        kl_to_sft=False,
        checkpoint_dir="/tmp/mimesis-bench-csd",
    )
    for key, value in (
        ("domains", args.domains.split(",") if args.domains else None),
        ("batch_size", args.batch_size),
        ("num_generations", args.num_generations),
        ("max_turns", args.max_turns),
    ):
        if value is not None:
            section[key] = value
    trainers = {}
    for name, csd in VARIANTS.items():
        model, tok = _policy(args.base, Path(args.sft), bf16=False)
        settings = AgentRLSettings.from_section({**section, "variant": name, "csd": csd})
        trainer = build_trainer(settings, seed=0, model=model, tokenizer=tok)
        trainer.create_optimizer_and_scheduler(num_training_steps=args.steps)
        trainer.current_gradient_accumulation_steps = 1  # set by train(); we drive the steps here
        trainers[name] = trainer

    drift: list[float] = []
    adv = trainers["csd_advantage"]
    original = adv.csd.advantages

    def advantages_with_check(model: Any, output: dict[str, Any], step: int = 0) -> dict[str, float]:
        if not drift:  # once: recorded sampling log-probs vs a fresh forward on the same tokens
            prompts, completions, masks = adv.csd._rows_from(output)
            prepared = adv.csd.prepare(output["episodes"], prompts, completions, masks)
            with torch.no_grad():
                rows = [(i, r) for i, r in enumerate(prepared.rows) if r is not None]
                fresh = token_logps(
                    model,
                    [prompts[i] + completions[i] for i, _ in rows],
                    [r.student_pos for _, r in rows],
                    adv.csd.temperature,
                )
            for (i, r), f in zip(rows, fresh, strict=True):
                rec = output["sampling_per_token_logps"][i, r.completion_idx]
                drift.append(float((rec - f).abs().max()))
        return original(model, output, step)

    adv.csd.advantages = advantages_with_check

    times: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    for step in range(args.steps):
        for name, trainer in trainers.items():
            trainer.model.train()
            batch = next(iter(trainer.get_train_dataloader()))
            before = {k: len(v) for k, v in trainer.timing.items()}
            start, cpu_start = time.perf_counter(), time.process_time()
            loss = trainer.training_step(trainer.model, batch, None)
            trainer.optimizer.step()
            trainer.optimizer.zero_grad()
            trainer.state.global_step += 1
            total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            new = {k: sum(v[before.get(k, 0) :]) for k, v in trainer.timing.items()}
            times[name].append(
                {
                    "step": total,
                    "cpu_seconds": cpu,
                    "rollout": new.get("rollout", 0.0),
                    "teacher_forward": new.get("teacher_forward", 0.0),
                    "loss": float(loss),
                }
            )
            print(
                f"step {step} {name}: {total:.1f}s, cpu {cpu:.1f}s (rollout {new.get('rollout', 0.0):.1f}s, "
                f"teacher {new.get('teacher_forward', 0.0):.1f}s)",
                flush=True,
            )

        report(times, drift, section, args, done=step + 1)


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    med = {
        k: statistics.median(r[k] for r in rows)
        for k in ("step", "cpu_seconds", "rollout", "teacher_forward")
    }
    med["optimisation_and_rest"] = med["step"] - med["rollout"] - med["teacher_forward"]
    return {k: round(v, 3) for k, v in med.items()}


def report(
    times: dict[str, list[dict[str, float]]],
    drift: list[float],
    section: dict[str, Any],
    args: argparse.Namespace,
    done: int,
) -> None:
    """Written after every round, so an interrupted run still leaves its measured rounds."""
    import torch

    result = {name: summary(rows) for name, rows in times.items() if rows}
    plain = result["plain"]["step"]
    payload = {
        "cpu_model": cpu_model(),
        "load_avg_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "torch_threads": torch.get_num_threads(),
        "base": args.base,
        "user": args.user,
        "rounds_done": done,
        "settings": {
            k: section[k]
            for k in ROLLOUT_SETTING_KEYS
        },
        "median_seconds": result,
        "ratio_to_plain": {name: round(r["step"] / plain, 3) for name, r in result.items()},
        # Under a loaded machine wall time mostly measures the neighbours; the process's own CPU time
        # is the cost it would have on idle cores.
        "cpu_ratio_to_plain": {
            name: round(r["cpu_seconds"] / result["plain"]["cpu_seconds"], 3) for name, r in result.items()
        },
        "advantage_form_logp_drift_max": round(max(drift), 5) if drift else None,
        "advantage_form_logp_drift_median": round(statistics.median(drift), 5) if drift else None,
        "raw": times,
    }
    write_result("csd", payload)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
