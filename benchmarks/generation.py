"""The engine's generation against transformers' own `generate`, and a decode step against its bound.

    python -m benchmarks.generation [--model models/base] [--batch 16 --batch 64] [--max-new-tokens 64]
                                    [--dtype auto] [--threads N] [--repeats 1]

Same model, prompts and decoding on both sides: sampled at T 0.8, top-p 0.95, stop at the end of
turn, `--max-new-tokens` at most. Prompts are real human chats (the installed `chitchat-dataset`
corpus) rendered with the chat template and cut to 300-600 tokens, ending on a user turn. Weights
are frozen, as on every path that serves a trained party (adapters loaded for inference).

- `hf_generate`: one padded `model.generate` call per batch (stock sampling and cache);
- `engine`: `generate_batch`, the project's decoding loop (rows leave as they finish, a sampler
  that reads the top logits only, preallocated KV).
Reported per batch size: turns/s of each and their ratio (aim >= 4x), and the engine's ms per
decode step measured on the same prompts with stopping off (64 steps minus 1, over 63), next to
the **bandwidth bound**: the bytes a decode step must read (weights + that step's mean KV) over
the read bandwidth measured here (a `sum` over a buffer of the same size), i.e. the fastest a step
could run on this machine. Aim: within 2x of it. JSON in `benchmarks/results/generation.json`.

The CPU is shared with whatever else runs: ratios are measured within one run, back to back; the
result records the CPU model and load.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks._common import peak_rss_mib, write_result

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "models" / "base"
TEMPERATURE, TOP_P = 0.8, 0.95


def _model(path: Path, dtype: str) -> tuple[Any, Any, str]:
    from mimesis_rl.models.loading import load_base
    from mimesis_rl.models.precision import device_and_dtype

    if not (path / "config.json").exists():
        raise SystemExit(f"{path}: no model (run `python -m tasks.base_model` first)")
    resolved = device_and_dtype("cpu")[1] if dtype == "auto" else getattr(torch, dtype)
    model, tok = load_base(path, dtype=resolved, device="cpu", padding_side="left")
    for param in model.parameters():
        param.requires_grad_(False)
    return model.eval(), tok, str(resolved).removeprefix("torch.")


def real_prompts(tokenizer: Any, n: int, low: int = 300, high: int = 600) -> list[list[int]]:
    """`n` token contexts from real chats: whole turns kept from the start while they fit in `high`
    tokens, ending on a user turn; chats shorter than `low` are skipped."""
    from mimesis_rl.data.adapters.chitchat import embedded_path, read_file
    from mimesis_rl.models.inference.chat import ChatFormat

    chat = ChatFormat(tokenizer)
    out: list[list[int]] = []
    for item in read_file(embedded_path()):
        turns = getattr(item, "turns", None)
        if not turns:
            continue
        messages: list[dict[str, str]] = []
        best: list[int] = []
        for turn in turns:
            messages.append({"role": turn.role, "content": turn.content})
            if turn.role != "user":
                continue
            ids = chat.prompt_ids(messages)
            if len(ids) > high:
                break
            best = ids
        if len(best) >= low:
            out.append(best)
        if len(out) == n:
            return out
    raise SystemExit(f"only {len(out)} chats of {low}-{high} tokens in the corpus, wanted {n}")


def hf_generate(model: Any, tok: Any, prompts: list[list[int]], max_new: int, stop_ids: list[int],
                seed: int) -> tuple[float, int]:
    """(seconds, new tokens) of one stock `generate` call over the left-padded batch."""
    width = max(map(len, prompts))
    pad = tok.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    torch.manual_seed(seed)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=TEMPERATURE,
                             top_p=TOP_P, top_k=None, max_new_tokens=max_new, eos_token_id=stop_ids,
                             pad_token_id=pad, use_model_defaults=False)
    seconds = time.perf_counter() - start
    new = out[:, width:]
    tokens = sum(int(next((i + 1 for i, t in enumerate(row.tolist()) if t in stop_ids), len(row)))
                 for row in new)
    return seconds, tokens


def engine(model: Any, prompts: list[list[int]], max_new: int, stop_ids: list[int], pad: int,
           seed: int) -> tuple[float, int]:
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.inference.scheduler import generate_batch

    params = SamplingParams(max_new_tokens=max_new, do_sample=True, temperature=TEMPERATURE, top_p=TOP_P)
    start = time.perf_counter()
    gens = generate_batch(model, prompts, params, stop_ids=stop_ids, pad_id=pad,
                          seeds=[seed * 1000 + i for i in range(len(prompts))])
    return time.perf_counter() - start, sum(len(g.token_ids) for g in gens)


def read_bandwidth(nbytes: int, repeats: int = 5) -> float:
    """Bytes/s of a streaming read (`sum` over an fp32 buffer of `nbytes`: vectorised, so memory-bound),
    best of `repeats`."""
    buffer = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        buffer.sum()
        best = min(best, time.perf_counter() - start)
    return nbytes / best


def step_cost(model: Any, prompts: list[list[int]], pad: int, steps: int = 64) -> dict[str, Any]:
    """ms per decode step of the engine (no stopping: every row decodes `steps` tokens), and the
    bound set by the bytes it must read."""
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.inference.scheduler import generate_batch

    def run(n: int) -> float:
        params = SamplingParams(max_new_tokens=n, do_sample=True, temperature=TEMPERATURE, top_p=TOP_P)
        start = time.perf_counter()
        generate_batch(model, prompts, params, stop_ids=[], pad_id=pad, seeds=list(range(len(prompts))))
        return time.perf_counter() - start

    # best of two each: on a shared machine the minimum is the least disturbed measurement
    one, full = min(run(1), run(1)), min(run(steps), run(steps))
    ms = (full - one) / (steps - 1) * 1000
    config = model.config
    kv_heads = config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    elem = next(model.parameters()).element_size()
    per_token_kv = 2 * config.num_hidden_layers * kv_heads * head_dim * elem
    width = max(map(len, prompts)) + steps // 2  # the padded KV a mid-turn step attends over
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    kv = len(prompts) * width * per_token_kv
    bandwidth = read_bandwidth(weights + kv)
    bound_ms = (weights + kv) / bandwidth * 1000
    return {"ms_per_step": round(ms, 1), "bound_ms": round(bound_ms, 1),
            "ratio_to_bound": round(ms / bound_ms, 2), "aim_ratio_to_bound": 2.0,
            "weights_mib": round(weights / 2**20), "kv_mib": round(kv / 2**20),
            "read_gb_per_s": round(bandwidth / 1e9, 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    from mimesis_rl.models.inference.chat import ChatFormat
    from mimesis_rl.threads import set_threads

    threads = set_threads(args.threads)
    model, tok, dtype = _model(Path(args.model), args.dtype)
    chat = ChatFormat(tok)
    stops = list(chat.stop_ids)
    batches = args.batch or [16, 64]
    prompts = real_prompts(tok, max(batches))
    results: dict[str, Any] = {}
    for batch in batches:
        rows = prompts[:batch]
        hf = [hf_generate(model, tok, rows, args.max_new_tokens, stops, seed) for seed in range(args.repeats)]
        ours = [engine(model, rows, args.max_new_tokens, stops, chat.pad_id, seed)
                for seed in range(args.repeats)]
        hf_s, ours_s = sum(s for s, _ in hf), sum(s for s, _ in ours)
        turns = batch * args.repeats
        results[f"batch_{batch}"] = {
            "prompt_tokens_mean": round(sum(map(len, rows)) / batch, 1),
            "hf_generate": {"seconds": round(hf_s, 2), "turns_per_second": round(turns / hf_s, 3),
                            "new_tokens": sum(t for _, t in hf)},
            "engine": {"seconds": round(ours_s, 2), "turns_per_second": round(turns / ours_s, 3),
                       "new_tokens": sum(t for _, t in ours)},
            "speedup": round(hf_s / ours_s, 2),
            "aim_speedup": 4.0,
            "decode_step": step_cost(model, rows, chat.pad_id),
        }
        print(f"batch {batch}: {results[f'batch_{batch}']}", flush=True)
        # written after every batch size: a long run stopped half-way keeps what it measured
        write_result("generation", {"model": args.model, "dtype": dtype, "threads": threads,
                                    "max_new_tokens": args.max_new_tokens, "temperature": TEMPERATURE,
                                    "top_p": TOP_P, "results": results, "peak_rss_mib": peak_rss_mib()})


if __name__ == "__main__":
    main()
