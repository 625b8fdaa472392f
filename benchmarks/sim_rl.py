"""sim_rl's GRPO steps with the completions sampled on our engine vs TRL's own `generate`, in one run.

    python -m benchmarks.sim_rl [--model models/base] [--sft-dir DIR] [--steps 4] [--threads 1]

Both variants run `simulator.rl.train_rl` with params.yaml's `sim_rl` section as it is (GRPO options,
rewards; 8 completions per step = 2 prompts x 4, up to 96 tokens each) but for `generation`, the
labeler (`rules`: the ensemble's artifacts may not be built here), a 16-sample discriminator (set-up
only) and `max_steps`. Each variant runs in its own child process on the same SFT adapter (`--sft-dir`,
else a LoRA simulator trained here for `--sft-steps` steps on the demo's sim_sft settings over the
data), same seed; rounds alternate engine / trl. Per step: wall seconds (a TrainerCallback around each
optimizer step), seconds inside generation (TRL's `_generate`: the engine's `rollout_func` or
transformers' `generate`), and the mean completion length TRL logged (the two paths draw different
samples, so lengths differ a little; generated tokens per generation second is given beside).
The first step of each run is reported apart (warm-up) and left out of the means.
The CPU is shared with other jobs: load averages are recorded, the ratio is indicative.
Writes benchmarks/results/sim_rl.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks._common import RESULTS_DIR, measure, write_result

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "sim" / "conversations.jsonl"
VARIANTS = ("engine", "trl")


def _data() -> Path:
    for candidate in (ROOT / "data/processed/conversations/train.jsonl",
                      ROOT / "data/processed/splits/train.jsonl"):
        if candidate.exists():
            return candidate
    return FIXTURE


def _params() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def train_sft_adapter(model: str, data: str, steps: int, out: Path) -> Path:
    """A LoRA simulator on the demo's sim_sft settings, `steps` steps (only the adapter's shape matters
    for the timing; a few steps make its turns look like the format rather than the base's)."""
    from mimesis_rl.simulator.sft import SFTSettings, train_sft

    section = dict(_params()["sim_sft"])
    section.pop("registry", None)
    section.update(base_model=model, train=data, val=None, device="cpu", output_dir=str(out),
                   checkpoint_dir=str(out.parent / "sft_ckpt"))
    section["trainer"] = {**section.get("trainer", {}), "max_steps": steps, "save_steps": 10**6,
                          "logging_steps": 1}
    train_sft(SFTSettings.from_section(section), seed=0)
    return out


def child(variant: str, sft_dir: str, data: str, steps: int, out: str) -> None:
    """One variant's GRPO run; per-step timings to `out`."""
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    from mimesis_rl.simulator.rl import RLSettings, train_rl

    timings: dict[str, list[float]] = {"step": [], "generate": []}

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            timings["step"].append(time.perf_counter() - self.start)

    original = GRPOTrainer._generate

    def timed(self: Any, prompts: list[Any]) -> Any:
        start = time.perf_counter()
        result = original(self, prompts)
        timings["generate"].append(time.perf_counter() - start)
        tokens.append(sum(len(ids) for ids in result[1]))  # completion ids per row
        return result

    tokens: list[int] = []
    GRPOTrainer._generate = timed  # benchmark-only observation of TRL's own method
    section = dict(_params()["sim_rl"])
    section.pop("registry", None)
    with tempfile.TemporaryDirectory() as tmp:
        section.update(sft_dir=sft_dir, train=data, device="cpu", generation=variant, labeler="rules",
                       output_dir=f"{tmp}/rl", checkpoint_dir=f"{tmp}/ckpt",
                       discriminator={**section.get("discriminator", {}), "samples": 16})
        section["trainer"] = {**section.get("trainer", {}), "max_steps": steps, "save_steps": 10**6}
        settings = RLSettings.from_section(section)
        timer = StepTimer()
        start = time.perf_counter()
        metrics = train_rl(settings, seed=0, extra_callbacks=[timer])
        seconds = time.perf_counter() - start
    Path(out).write_text(json.dumps({
        "seconds_total": seconds, "step_seconds": timings["step"], "generate_seconds": timings["generate"],
        "completion_tokens": tokens, "reward_first": metrics.get("reward.first"),
        "reward_last": metrics.get("reward.last")}))


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over every run's steps after its first (warm-up)."""
    steps = [s for r in runs for s in r["step_seconds"][1:]]
    gens = [g for r in runs for g in r["generate_seconds"][1:]]
    toks = [t for r in runs for t in r["completion_tokens"][1:]]
    return {"runs": runs, "steps_timed": len(steps),
            "seconds_per_step": sum(steps) / len(steps),
            "generate_seconds_per_step": sum(gens) / len(gens),
            "completion_tokens_per_step": sum(toks) / len(toks),
            "completion_tokens_per_generate_second": sum(toks) / sum(gens),
            "first_step_seconds": [r["step_seconds"][0] for r in runs]}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sim_rl")
    parser.add_argument("--model", default=str(ROOT / "models" / "base"))
    parser.add_argument("--sft-dir", help="a LoRA simulator folder (trained there first if it has none; "
                                          "default: one trained in a scratch folder)")
    parser.add_argument("--sft-steps", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps per run (the first is warm-up)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: on a shared CPU, 2 threads wait on each other)")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # inherited by the child processes
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if args.child:
        child(args.child, args.sft_dir, args.data, args.steps, args.out)
        return
    if not Path(args.model).is_dir():
        raise SystemExit(f"{args.model}: no base model (run `python -m tasks.base_model`)")
    data = str(_data())
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mimesis-bench-simrl-") as tmp:
        sft_dir = args.sft_dir or str(Path(tmp) / "sft")
        if not (Path(sft_dir) / "mimesis.json").exists():  # none given, or a folder to train one into
            train_sft_adapter(args.model, data, args.sft_steps, Path(sft_dir))
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        for _ in range(args.rounds):
            for variant in VARIANTS:
                out = str(Path(tmp) / f"{variant}.json")
                usage = measure([sys.executable, "-m", "benchmarks.sim_rl", "--child", variant,
                                 "--sft-dir", sft_dir, "--data", data, "--steps", str(args.steps),
                                 "--threads", str(args.threads), "--out", out], cwd=ROOT)
                record = json.loads(Path(out).read_text())
                runs[variant].append({**record, "peak_rss_mib": usage["peak_rss_mib"],
                                      "loadavg_after": os.getloadavg()})
    result = {v: summarise(runs[v]) for v in VARIANTS}
    trl_step, engine_step = result["trl"]["seconds_per_step"], result["engine"]["seconds_per_step"]
    payload = {
        "model": args.model, "sft_dir": sft_dir, "sft_steps_if_trained_here": args.sft_steps, "data": data,
        "torch_threads": args.threads, "steps_per_run": args.steps, "rounds": args.rounds,
        "grpo": {k: _params()["sim_rl"]["trainer"].get(k) for k in
                 ("per_device_train_batch_size", "gradient_accumulation_steps", "num_generations",
                  "max_completion_length", "temperature", "top_p")},
        **result,
        "speedup_step_engine_vs_trl": trl_step / engine_step,
        "speedup_generate_engine_vs_trl": (result["trl"]["generate_seconds_per_step"]
                                          / result["engine"]["generate_seconds_per_step"]),
        "noise": {"shared_cpu": True, "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
                  "note": "other jobs share the cores; the ratio is indicative"},
    }
    write_result("sim_rl", payload)
    print(f"sim_rl s/step: engine {engine_step:.2f}, trl {trl_step:.2f} ({trl_step / engine_step:.2f}x); "
          f"results in {RESULTS_DIR / 'sim_rl.json'}")


if __name__ == "__main__":
    main(sys.argv[1:])
