"""Does an RL agent beat its warm start on dialogues nobody looked at? A paired confirmation.

    python -m benchmarks.agent_confirm --base models/base --before SFT_DIR --after RL_DIR
                                       [--env bargain] [--user scripted:train_mix] [--seeds 64]
                                       [--first-seed 10000100] [--temperature 0.5] [--max-turns 3]

A scale point (`benchmarks.agent_scale`) is chosen after looking at its own evaluation seeds; this
replays both agents on fresh seeds, sampled at the RL temperature with two sampling seeds and
greedy, and writes the paired gains (bootstrap intervals) to benchmarks/results/agent_confirm.json.
Not part of `python -m benchmarks` (it needs two trained agents).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from benchmarks._common import RESULTS_DIR, cpu_model, machine

RUN_BY_DEFAULT = False


def main(argv: list[str]) -> None:
    import torch

    from mimesis_rl.agent.evaluate import evaluate, paired_gain
    from mimesis_rl.agent.rl_trainer import load_policy
    from mimesis_rl.envs.specs import make_user
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.rollout import ModelAgent, ModelRunner

    parser = argparse.ArgumentParser(prog="python -m benchmarks.agent_confirm",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--before", required=True, help="the warm start (an agent folder)")
    parser.add_argument("--after", required=True, help="the RL agent (an agent folder)")
    parser.add_argument("--env", default="bargain")
    parser.add_argument("--user", default="scripted:train_mix")
    parser.add_argument("--seeds", type=int, default=64)
    parser.add_argument("--first-seed", type=int, default=10**7 + 100)
    parser.add_argument("--temperature", type=float, default=0.5)
    parser.add_argument("--max-turns", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    seeds = [args.first_seed + i for i in range(args.seeds)]
    users = {args.user: lambda domain: make_user(args.user, domain)}
    sampled = SamplingParams(max_new_tokens=64, do_sample=True, temperature=args.temperature)
    modes: dict[str, tuple[SamplingParams, int]] = {
        f"sampled_t{args.temperature:g}_seed100": (sampled, 100),
        f"sampled_t{args.temperature:g}_seed101": (sampled, 101),
        "greedy": (SamplingParams(max_new_tokens=64, do_sample=False), 0)}
    load_start, start = [round(x, 2) for x in os.getloadavg()], time.perf_counter()
    scores: dict[tuple[str, str], Any] = {}
    for side in ("before", "after"):
        model, tokenizer = load_policy(getattr(args, side), args.base, True)
        for mode, (params, seed) in modes.items():
            runner = ModelRunner(model, tokenizer, params, adapter="default", seed=seed)
            scores[(side, mode)] = evaluate(ModelAgent(runner), users, [args.env], seeds, args.max_turns,
                                            keep_dialogues=True)[args.user]
    results = {mode: {"before": scores[("before", mode)]["mean"], "after": scores[("after", mode)]["mean"],
                      "paired": {k: paired_gain(scores[("before", mode)], scores[("after", mode)], k)
                                 for k in ("reward", "success")}} for mode in modes}
    record = {"benchmark": "agent_confirm", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "machine": machine(), "cpu_model": cpu_model(), "load_start": load_start,
              "load_end": [round(x, 2) for x in os.getloadavg()],
              "seconds": round(time.perf_counter() - start, 1),
              "command": "python -m benchmarks.agent_confirm " + " ".join(argv),
              "seeds": f"{seeds[0]}..{seeds[-1]}", "results": results}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "agent_confirm.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
