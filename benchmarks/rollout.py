"""Rollout engine vs the naive loop: turns per second, and memory of two adapters on one base.

    python -m benchmarks.rollout [--model models/base] [--dialogues 16] [--env bargain] [--max-turns 4]
                                 [--max-new-tokens 64] [--dtype float32 --dtype auto] [--threads N]
                                 [--skip-memory]

Throughput: the same 16 dialogues (same model, seeds, domain, decoding) played twice, by the
engine (`run_rollouts`: one batched generate per side per round) and by the naive loop
(`play_naive`: each dialogue alone, one plain `model.generate` per turn). The agent runs on an
`agent` LoRA adapter, 12 users on a `simulator` adapter over the same base, 4 are scripted users.
Decoding is greedy on both sides so the two runs do the same work (their transcripts are compared
and the agreement is reported). Turns/s counts agent + user turns. Measured in fp32 (batched and
single decoding agree exactly) and in the project's CPU dtype (`auto`, bf16 here: what the demo
runs; batching can flip near-tied greedy tokens there, so transcripts may differ a little).
Per generate call the engine reports rows, tokens prefilled and seconds. The engine also plays the
same dialogues once more on HF's forward per decode step (`engine_hf_forward`, `MIMESIS_FUSED_DECODE=0`,
run first): what the fused step (`models.inference.fused`, adapters included) adds in a rollout.
`--skip-memory` keeps the last memory measurement, with its date.

Memory (each variant in its own child process, peak RSS = VmHWM): a short rollout with
- `one_model`: the bare base model playing both sides (the baseline),
- `shared_base`: base + agent adapter + simulator adapter (what the engine does),
- `two_models`: two separate copies (agent model, simulator model), what one would do without it.

The demo model is SmolLM2-135M-Instruct at models/base (`python -m tasks.base_model`); without it
the tiny random model is used and the result says so. The CPU is shared with other jobs: treat the
timings as noisy (the ratio is measured within one run, back to back).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks._common import RESULTS_DIR, measure, peak_rss_mib, write_result

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "models" / "base"
SCRIPTED_EVERY = 4  # every 4th dialogue has a scripted user
MEMORY_VARIANTS = ("one_model", "shared_base", "two_models")
RESULT = RESULTS_DIR / "rollout.json"


def _model_dir(requested: str | None) -> tuple[Path, str | None]:
    if requested:
        path = Path(requested)
        if not (path / "config.json").exists():
            raise SystemExit(f"--model {path}: not a model folder (no config.json)")
        return path, None
    if (DEFAULT_MODEL / "config.json").exists():
        return DEFAULT_MODEL, None
    from dataclasses import replace

    from mimesis_rl.models.testing import TINY_TEST_CONFIG, make_tiny_base

    tiny = Path(tempfile.mkdtemp(prefix="bench-rollout-tiny-")) / "base"
    make_tiny_base(tiny, config=replace(TINY_TEST_CONFIG, max_position_embeddings=2048))
    note = (
        f"{DEFAULT_MODEL} not found (run `python -m tasks.base_model`): measured on the tiny random model, "
        "whose numbers say little about the demo model"
    )
    print(f"NOTE: {note}", file=sys.stderr)
    return tiny, note


def _dtype(name: str) -> torch.dtype:
    """`auto`: the project's precision switch on CPU (params.yaml `models.cpu_dtype`)."""
    if name != "auto":
        return getattr(torch, name)
    from mimesis_rl.config import load_params
    from mimesis_rl.models.config import PrecisionSettings
    from mimesis_rl.models.precision import resolve_cpu_dtype

    configured = PrecisionSettings.from_params(load_params(ROOT / "params.yaml")).cpu_dtype
    return getattr(torch, resolve_cpu_dtype(configured))


def _shared_base(model_dir: Path, dtype: torch.dtype) -> tuple[Any, Any]:
    """Base + `agent` and `simulator` LoRA adapters (all linear layers, r=16), frozen, eval mode."""
    from peft import get_peft_model

    from mimesis_rl.models.config import LoraSettings
    from mimesis_rl.models.loading import load_base
    from mimesis_rl.models.lora import peft_lora_config

    model, tokenizer = load_base(model_dir, dtype=dtype, device="cpu")
    config = peft_lora_config(LoraSettings(r=16, alpha=32, dropout=0.0, target_modules="all-linear"))
    peft = get_peft_model(model, config, adapter_name="agent")
    peft.add_adapter("simulator", copy.deepcopy(config))
    for param in peft.parameters():
        param.requires_grad_(False)
    peft.set_adapter("agent", inference_mode=True)
    return peft.eval(), tokenizer


def _parties(model: Any, tokenizer: Any, args: argparse.Namespace, naive: bool) -> tuple[Any, list[Any]]:
    from mimesis_rl.envs.registry import scripted_user
    from mimesis_rl.rollout import ModelAgent, ModelRunner, SamplingParams
    from mimesis_rl.rollout.naive import NaiveAgent
    from mimesis_rl.simulator.runtime import UserSimulator

    greedy = SamplingParams(max_new_tokens=args.max_new_tokens)
    agent_adapter = "agent" if hasattr(model, "peft_config") else None
    user_adapter = "simulator" if hasattr(model, "peft_config") else None
    agent_runner = ModelRunner(model, tokenizer, greedy, adapter=agent_adapter)
    # The naive loop's user: the one simulator runtime, one dialogue at a time, without KV reuse.
    user_runner = ModelRunner(model, tokenizer, greedy, adapter=user_adapter, reuse_cache=not naive)
    agent = NaiveAgent(agent_runner) if naive else ModelAgent(agent_runner)
    sim = UserSimulator(user_runner, name="simulator")
    scripted = scripted_user(args.env, "cooperative")
    users = [scripted if i % SCRIPTED_EVERY == SCRIPTED_EVERY - 1 else sim for i in range(args.dialogues)]
    return agent, users


def _turns(states: list[Any]) -> tuple[int, int]:
    agent = sum(s.agent_turns for s in states)
    user = sum(1 for s in states for t in s.trace if t.role == "user")
    return agent, user


def _dialogue(state: Any) -> list[tuple[str, str]]:
    return [(t.role, t.content) for t in state.trace]


def throughput(model_dir: Path, args: argparse.Namespace, dtype: str) -> dict[str, Any]:
    from mimesis_rl.envs.registry import make_env
    from mimesis_rl.rollout import run_rollouts
    from mimesis_rl.rollout.naive import play_naive

    model, tokenizer = _shared_base(model_dir, _dtype(dtype))
    env = make_env(args.env, max_turns=args.max_turns)
    seeds = list(range(args.dialogues))

    from benchmarks.generation import fused_mode

    with fused_mode(False):  # the engine on HF's forward per step: what the fused step adds
        agent_hf, users_hf = _parties(model, tokenizer, args, naive=False)
        start = time.perf_counter()
        run_rollouts(env, agent_hf, users_hf, seeds, progress=False)
        engine_hf_s = time.perf_counter() - start

    agent, users = _parties(model, tokenizer, args, naive=False)
    start = time.perf_counter()
    result = run_rollouts(env, agent, users, seeds, progress=False)
    engine_s = time.perf_counter() - start
    engine_states = result.states

    agent_n, users_n = _parties(model, tokenizer, args, naive=True)
    start = time.perf_counter()
    naive_states = play_naive(env, agent_n, users_n, seeds)
    naive_s = time.perf_counter() - start

    user_runner = next(u.runner for u in users if hasattr(u, "runner"))
    e_agent, e_user = _turns(engine_states)
    n_agent, n_user = _turns(naive_states)
    same = sum(_dialogue(a) == _dialogue(b) for a, b in zip(engine_states, naive_states, strict=True))
    engine_tps = (e_agent + e_user) / engine_s
    naive_tps = (n_agent + n_user) / naive_s
    return {
        "engine": {
            "seconds": round(engine_s, 2),
            "agent_turns": e_agent,
            "user_turns": e_user,
            "turns_per_second": round(engine_tps, 3),
            "agent_calls": {
                "rows": agent.runner.batch_sizes,
                "prefill_tokens": agent.runner.prefill_tokens,
                "seconds": agent.runner.call_seconds,
            },
            "user_calls": {
                "rows": user_runner.batch_sizes,
                "prefill_tokens": user_runner.prefill_tokens,
                "seconds": user_runner.call_seconds,
            },
        },
        "engine_hf_forward": {"seconds": round(engine_hf_s, 2),
                              "fused_speedup": round(engine_hf_s / engine_s, 2)},
        "naive": {
            "seconds": round(naive_s, 2),
            "agent_turns": n_agent,
            "user_turns": n_user,
            "turns_per_second": round(naive_tps, 3),
        },
        "speedup": round(engine_tps / naive_tps, 2),
        "aim_speedup": 4.0,
        "identical_transcripts": f"{same}/{len(seeds)}",
        "summary": result.summary(),
    }


def _hwm_mib() -> float:
    """This process's peak RSS (VmHWM) since exec. Unlike getrusage's ru_maxrss, it does not carry
    over the parent's peak from before the fork, so a big benchmark parent cannot inflate it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return peak_rss_mib()  # not Linux: the best this platform offers


def memory_worker(variant: str, model_dir: Path, out: Path, args: argparse.Namespace) -> None:
    """One variant in this (child) process: load, play a short rollout, report parameter bytes."""
    from mimesis_rl.envs.registry import make_env
    from mimesis_rl.models.loading import load_base
    from mimesis_rl.rollout import ModelAgent, ModelRunner, SamplingParams, run_rollouts
    from mimesis_rl.simulator.runtime import UserSimulator

    dtype = _dtype(args.dtype[0])
    baseline = _hwm_mib()
    greedy = SamplingParams(max_new_tokens=16)
    if variant == "one_model":
        model, tok = load_base(model_dir, dtype=dtype, device="cpu")
        models = [model]
        agent = ModelAgent(ModelRunner(model, tok, greedy))
        user = UserSimulator(ModelRunner(model, tok, greedy))
    elif variant == "shared_base":
        model, tok = _shared_base(model_dir, dtype)
        models = [model]
        agent = ModelAgent(ModelRunner(model, tok, greedy, adapter="agent"))
        user = UserSimulator(ModelRunner(model, tok, greedy, adapter="simulator"))
    elif variant == "two_models":
        a_model, tok = load_base(model_dir, dtype=dtype, device="cpu")
        u_model, _ = load_base(model_dir, dtype=dtype, device="cpu")
        models = [a_model, u_model]
        agent = ModelAgent(ModelRunner(a_model, tok, greedy))
        user = UserSimulator(ModelRunner(u_model, tok, greedy))
    else:
        raise SystemExit(f"unknown memory variant {variant!r}")
    run_rollouts(make_env(args.env, max_turns=2), agent, user, list(range(8)), progress=False)
    param_bytes = sum(p.numel() * p.element_size() for m in models for p in m.parameters())
    out.write_text(
        json.dumps(
            {
                "param_mib": round(param_bytes / 2**20, 1),
                "hwm_before_load_mib": baseline,
                "hwm_mib": _hwm_mib(),
            }
        )
    )


def memory(model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rollout-mem-") as tmp:
        for variant in MEMORY_VARIANTS:
            out = Path(tmp) / f"{variant}.json"
            cmd = [
                sys.executable,
                "-m",
                "benchmarks.rollout",
                "--memory-worker",
                variant,
                "--model",
                str(model_dir),
                "--env",
                args.env,
                "--worker-out",
                str(out),
            ]
            cmd += ["--dtype", args.dtype[0]] + (["--threads", str(args.threads)] if args.threads else [])
            run = measure(
                cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
            )
            results[variant] = {"seconds": run["seconds"], **json.loads(out.read_text())}
    base = results["one_model"]["hwm_mib"]
    floor = results["one_model"]["hwm_before_load_mib"]  # python + torch + libraries, before any weights
    for variant in MEMORY_VARIANTS:
        peak = results[variant]["hwm_mib"]
        results[variant]["ratio_vs_one_model"] = round(peak / base, 3)
        results[variant]["ratio_vs_one_model_above_import"] = round((peak - floor) / (base - floor), 3)
    results["aim_ratio_shared_base"] = 1.3
    results["dtype"] = str(_dtype(args.dtype[0])).replace("torch.", "")
    return results


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="base model folder (default: models/base, else tiny)")
    parser.add_argument(
        "--env", default="bargain", help="domain (default bargain: the shortest system prompt)"
    )
    parser.add_argument("--dialogues", type=int, default=16)
    parser.add_argument("--max-turns", type=int, default=4, help="agent turns per dialogue")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--dtype",
        action="append",
        choices=("auto", "float32", "bfloat16"),
        help="weights dtype, repeatable (default: float32 and auto). float32 keeps batched and single greedy "
        "decoding in agreement, so both runs do the same work; auto = the project's CPU switch "
        "(params.yaml models.cpu_dtype), where batching may flip near-tied tokens",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--memory-worker", choices=MEMORY_VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = parse_args(argv)
    args.dtype = args.dtype or ["float32", "auto"]
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.memory_worker:
        memory_worker(args.memory_worker, Path(args.model), Path(args.worker_out), args)
        return
    model_dir, note = _model_dir(args.model)
    payload: dict[str, Any] = {
        "model": str(model_dir),
        "env": args.env,
        "dialogues": args.dialogues,
        "max_turns": args.max_turns,
        "max_new_tokens": args.max_new_tokens,
        "decoding": "greedy (both sides)",
        "users": f"{args.dialogues - args.dialogues // SCRIPTED_EVERY} simulator-adapter users, "
        f"{args.dialogues // SCRIPTED_EVERY} scripted (cooperative)",
        "load_average_at_start": list(os.getloadavg()),
        "noise": "CPU shared with other jobs; engine and naive run back to back in one process",
    }
    if note:
        payload["note"] = note
    if not args.skip_memory:  # first, while this process is small (see _hwm_mib)
        payload["memory"] = memory(model_dir, args)
        payload["memory_measured"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_result("rollout", payload)
    elif RESULT.exists():  # the last memory measurement stays, with its date
        previous = json.loads(RESULT.read_text())
        payload.update({k: previous[k] for k in ("memory", "memory_measured") if k in previous})
    payload["throughput"] = {}
    for dtype in dict.fromkeys(str(_dtype(d)).replace("torch.", "") for d in args.dtype):
        payload["throughput"][dtype] = throughput(model_dir, args, dtype)
        payload["load_average_at_end"] = list(os.getloadavg())
        write_result("rollout", payload)


if __name__ == "__main__":
    main(sys.argv[1:])
