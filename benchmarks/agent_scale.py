"""How large an agent run must be before RL moves it: one point of the demo's scale curve.

    python -m benchmarks.agent_scale --project DIR --tag NAME [--epochs 4 | --sft SFT_DIR]
                                     [--rl-steps 12] [--batch 8] [--eval-seeds 6]
                                     [--user prompted:assistant | learned:DIR] [--domains D ...]
                                     [--temperature T] [--learning-rate LR]

DIR is a demo project after `make run` (models/base, and models/simulator/rl for a learned user).
The warm start is the demo's `agent_sft` (same transcripts, LoRA, settings) trained for `--epochs`
epochs, or an existing agent folder (`--sft`). RL is the demo's `agent_rl` (same domains, turns,
tokens, learning rate, turn cost) for `--rl-steps` GRPO steps of `--batch` dialogues, against the
training user. Before and after, the agent plays the same `--eval-seeds` greedy dialogues per
domain; the gain is paired per dialogue with a bootstrap interval (domains weighed equally), so
"RL improves on agent_sft" is a measured verdict, not a reading of two means.

Each run adds one point (`--tag`) to benchmarks/results/agent_scale.json, with the CPU model and
load; the demo point itself is the `agent_rl` stage's own metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, cpu_model, machine

ROOT = Path(__file__).resolve().parents[1]
RUN_BY_DEFAULT = False  # needs a demo project (--project)


def warm_start(project: Path, epochs: float, out: Path) -> tuple[Path, dict[str, Any]]:
    from mimesis_rl.agent.sft import AgentSFTSettings, train_agent_sft
    from mimesis_rl.config import load_params

    section = dict(load_params(ROOT / "params.yaml", "demo")["agent_sft"])
    section.pop("registry", None)
    section.update(num_train_epochs=epochs, max_steps=-1, base_model=str(project / "models" / "base"),
                   output_dir=str(out / "sft"), checkpoint_dir=str(out / "sft-ckpt"))
    start = time.perf_counter()
    metrics = train_agent_sft(AgentSFTSettings.from_section(section), seed=1234)
    summary = {
        "epochs": epochs,
        "steps": metrics["steps"],
        "loss_first_last": [metrics["first_logged_loss"], metrics["last_logged_loss"]],
        "train_seconds": metrics["train_seconds"],
        "wall_seconds": round(time.perf_counter() - start, 1),
        "eval": {user: {d: {k: v[k] for k in ("acted_rate", "success_rate")} for d, v in per.items()}
                 for user, per in metrics["eval"].items()},
    }
    return out / "sft", summary


def reinforce(project: Path, sft: Path, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from mimesis_rl.agent.rl import train_agent_rl
    from mimesis_rl.config import load_params
    from tasks.agent_rl import settings

    variant = "assistant" if args.user.startswith("prompted:") else "mimesis"
    s, _, _ = settings(load_params(ROOT / "params.yaml", "demo"), variant)
    s = s.with_options(
        temperature=args.temperature if args.temperature is not None else s.option("temperature"),
        learning_rate=args.learning_rate if args.learning_rate is not None else s.option("learning_rate"),
        max_steps=args.rl_steps, batch_size=args.batch)
    s = replace(s, sft_dir=str(sft), base_model=str(project / "models" / "base"), user=args.user,
                domains=args.domains or s.domains, eval_domains=args.domains or s.eval_domains,
                eval_seeds=args.eval_seeds, output_dir=str(out / "rl"), report_dir=str(out / "rl-report"),
                checkpoint_dir=str(out / "rl-ckpt"),
                curve=replace(s.curve, select=()))  # what RL's last step did, not the curve's best point
    start = time.perf_counter()
    m = train_agent_rl(s, seed=0)
    rewards = m.get("frac_reward_zero_std") or []
    return {
        "user": s.user,
        "domains": s.domain_list,
        "steps": m["steps"],
        "batch": s.option("batch_size"),
        "learning_rate": s.option("learning_rate"),
        "temperature": s.option("temperature"),
        "train_seconds": m["train_seconds"],
        "eval_seconds": m["eval_seconds"],
        "wall_seconds": round(time.perf_counter() - start, 1),
        "reward_first_last": [m["first_reward"], m["last_reward"]],
        "frac_reward_zero_std_mean": round(sum(rewards) / len(rewards), 3) if rewards else None,
        "eval_before": {d: {k: v[k] for k in ("success_rate", "mean_reward", "acted_rate")}
                        for d, v in m["eval_before"].items()},
        "eval_after": {d: {k: v[k] for k in ("success_rate", "mean_reward", "acted_rate")}
                       for d, v in m["eval_after"].items()},
        "paired_gain": m.get("paired_gain"),
        "curve": m.get("curve"),  # greedy success at 0, ¼, ½, all of the steps (agent_rl.curve)
        "eval_dialogues_per_side": args.eval_seeds * len(s.domain_list),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.agent_scale",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--project", required=True, help="a demo project after `make run`")
    parser.add_argument("--tag", required=True, help="the point's name in agent_scale.json")
    parser.add_argument("--epochs", type=float, default=4.0)
    parser.add_argument("--sft", default=None, help="an existing agent_sft folder (skips the warm start)")
    parser.add_argument("--rl-steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--eval-seeds", type=int, default=6)
    parser.add_argument("--user", default="prompted:assistant")
    parser.add_argument("--learning-rate", type=float, default=None, help="default: agent_rl.learning_rate")
    parser.add_argument("--temperature", type=float, default=None,
                        help="the agent's sampling temperature in RL (default: the demo's)")
    parser.add_argument("--domains", nargs="+", default=None,
                        help="train and evaluate on these domains only (default: the demo's)")
    parser.add_argument("--work", default=None, help="where the agents are written (default: a temp dir)")
    args = parser.parse_args(argv)
    project = Path(args.project).resolve()
    if not (project / "models" / "base" / "config.json").exists():
        raise SystemExit(f"--project {project}: no models/base (run `make run` there first)")
    out = Path(args.work or f"/tmp/agent-scale-{args.tag}")
    point: dict[str, Any] = {"cpu_model": cpu_model(), "load_start": [round(x, 2) for x in os.getloadavg()],
                             "command": "python -m benchmarks.agent_scale " + " ".join(argv)}
    if args.sft:
        sft = Path(args.sft)
        point["warm_start"] = {"from": str(sft)}
    else:
        sft, point["warm_start"] = warm_start(project, args.epochs, out)
    point["rl"] = reinforce(project, sft, args, out)
    point["load_end"] = [round(x, 2) for x in os.getloadavg()]
    path = RESULTS_DIR / "agent_scale.json"
    record = json.loads(path.read_text()) if path.exists() else {"benchmark": "agent_scale", "points": {}}
    record["machine"] = machine()
    record["points"][args.tag] = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **point}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(point, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
