"""The engine's generation against transformers' own `generate`, and a decode step against its bound.

    python -m benchmarks.generation [--model models/base] [--batch 16 --batch 64] [--max-new-tokens 64]
                                    [--dtype auto] [--threads N] [--repeats 1] [--steps 64]
                                    [--cached 400] [--micro-repeats 9]

Same model, prompts and decoding on both sides: sampled at T 0.8, top-p 0.95, stop at the end of
turn, `--max-new-tokens` at most. Prompts are real human chats (the installed `chitchat-dataset`
corpus) rendered with the chat template and cut to 300-600 tokens, ending on a user turn. Weights
are frozen, as on every path that serves a trained party (adapters loaded for inference).

- `hf_generate`: one padded `model.generate` call per batch (stock sampling and cache);
- `engine`: `generate_batch`, the project's decoding loop (rows leave as they finish, a sampler
  that reads the top logits only, preallocated KV).
Reported per batch size: turns/s of each and their ratio (aim >= 4x), the engine run twice, with
the fused decode step (`models.inference.fused`) and without it (HF's forward per step,
`MIMESIS_FUSED_DECODE=0`), and the engine's ms per decode step in both modes measured on the same
prompts with stopping off (`--steps` decode steps after one prefill: the call's time minus its
prefill's, over the steps), next to the **bound**: the bytes a decode step must read (weights +
that step's mean KV) over the read bandwidth measured here (a `sum` over a buffer of the same
size), or the step's matmul FLOPs at the rate a model-shaped matmul reaches here (`matmul_rate`),
whichever is longer: the fastest a step could run on this machine. Aim: within 2x of it.
`ceiling_speedup`: `generate`'s time over the engine's prefill alone, the most any decoding loop
could gain while both sides prefill the same prompts (compute-bound matmuls, the same FLOPs). And a
micro-measure (`step_micro`): one decode step alone, HF's forward against the fused step, over the
same cache of `--cached` columns (random keys/values: the cost does not depend on them), the two
interleaved, median of `--micro-repeats`. JSON in `benchmarks/results/generation.json`.

The CPU is shared with whatever else runs: ratios are measured within one run, back to back (fused
and HF modes alternate); the result records the CPU model and the load before and after each batch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def fused_mode(on: bool) -> Iterator[None]:
    """The engine with (`on`) or without the fused decode step, through its switch."""
    from mimesis_rl.models.inference.fused import ENV

    before = os.environ.get(ENV)
    os.environ[ENV] = "1" if on else "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


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


def matmul_rate(dtype: torch.dtype, hidden: int, intermediate: int, rows: int = 2048,
                repeats: int = 3) -> float:
    """FLOP/s of one model-shaped matmul ([rows, hidden] x [hidden, intermediate], the MLP's up
    projection) in `dtype`, best of `repeats`: what this machine's arithmetic allows a projection."""
    x = torch.randn(rows, hidden).to(dtype)
    w = torch.randn(intermediate, hidden).to(dtype)
    torch.nn.functional.linear(x, w)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.nn.functional.linear(x, w)
        best = min(best, time.perf_counter() - start)
    return 2 * rows * hidden * intermediate / best


def step_cost(model: Any, prompts: list[list[int]], pad: int, steps: int = 64,
              repeats: int = 1) -> dict[str, Any]:
    """ms per decode step of the engine with and without the fused step (no stopping: every row
    decodes `steps` tokens; the call's time minus its prefill's, over the steps; the two modes
    alternate, best of `repeats`), and the bound set by the bytes a step must read."""
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.inference import scheduler

    def run() -> tuple[float, float]:
        params = SamplingParams(max_new_tokens=steps + 1, do_sample=True, temperature=TEMPERATURE,
                                top_p=TOP_P)
        prefill = scheduler._Engine.prefill
        spent: list[float] = []

        def timed(self: Any, ids: list[int]) -> Any:
            begin = time.perf_counter()
            try:
                return prefill(self, ids)
            finally:
                spent.append(time.perf_counter() - begin)

        scheduler._Engine.prefill = timed  # type: ignore[method-assign]
        try:
            start = time.perf_counter()
            scheduler.generate_batch(model, prompts, params, stop_ids=[], pad_id=pad,
                                     seeds=list(range(len(prompts))))
            total = time.perf_counter() - start
        finally:
            scheduler._Engine.prefill = prefill  # type: ignore[method-assign]
        return (total - sum(spent)) / steps * 1000, sum(spent)

    times: dict[str, list[float]] = {"hf": [], "fused": []}
    prefills: list[float] = []
    for _ in range(repeats):
        for name, on in (("hf", False), ("fused", True)):
            with fused_mode(on):
                ms, prefill_s = run()
                times[name].append(ms)
                prefills.append(prefill_s)
    config = model.config
    kv_heads = config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    elem = next(model.parameters()).element_size()
    per_token_kv = 2 * config.num_hidden_layers * kv_heads * head_dim * elem
    width = max(map(len, prompts)) + steps // 2  # the padded KV a mid-turn step attends over
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    kv = len(prompts) * width * per_token_kv
    bandwidth = read_bandwidth(weights + kv)
    read_ms = (weights + kv) / bandwidth * 1000
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    rate = matmul_rate(next(model.parameters()).dtype, config.hidden_size, config.intermediate_size)
    compute_ms = 2 * len(prompts) * linear / rate * 1000
    bound_ms = max(read_ms, compute_ms)
    hf_ms, fused_ms = min(times["hf"]), min(times["fused"])
    return {"ms_per_step": round(fused_ms, 1), "ms_per_step_hf_forward": round(hf_ms, 1),
            "fused_speedup": round(hf_ms / fused_ms, 2), "bound_ms": round(bound_ms, 1),
            "read_bound_ms": round(read_ms, 1), "compute_bound_ms": round(compute_ms, 1),
            "matmul_gflops": round(rate / 1e9, 1), "prefill_seconds": round(min(prefills), 2),
            "ratio_to_bound": round(fused_ms / bound_ms, 2),
            "ratio_to_bound_hf_forward": round(hf_ms / bound_ms, 2),
            "aim_ratio_to_bound": 2.0, "weights_mib": round(weights / 2**20), "kv_mib": round(kv / 2**20),
            "read_gb_per_s": round(bandwidth / 1e9, 2)}


def step_micro(model: Any, rows: int, cached: int = 400, repeats: int = 9, seed: int = 0) -> dict[str, Any]:
    """ms of one decode step alone, HF's forward vs the fused step, over the same cache of `cached`
    columns (random keys/values; rows padded on the left by 0-47 columns, as a batch of different
    lengths is), interleaved, median of `repeats` each. Sampling and bookkeeping are not included."""
    from transformers import DynamicCache

    from mimesis_rl.models.inference.attention import grouped_attention
    from mimesis_rl.models.inference.fused import FusedDecoder, decode_logits, eligible
    from mimesis_rl.models.inference.generation import contiguous_lm_head
    from mimesis_rl.models.inference.kvcache import BufferedLayer

    base = eligible(model)
    if base is None:
        raise SystemExit("the model does not qualify for the fused decode step")
    decoder = FusedDecoder(base)
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dtype = next(model.parameters()).dtype
    generator = torch.Generator().manual_seed(seed)
    past = DynamicCache()
    shape = (rows, config.num_key_value_heads, cached + 1, head_dim)
    layers = []
    for _ in range(config.num_hidden_layers):
        layer = BufferedLayer(0)
        keys = torch.randn(shape, generator=generator).to(dtype)
        values = torch.randn(shape, generator=generator).to(dtype)
        layer._keys, layer._values, layer._length = keys, values, cached
        layer.keys, layer.values = keys[:, :, :cached], values[:, :, :cached]
        layer.dtype, layer.device, layer.is_initialized = dtype, keys.device, True
        layers.append(layer)
    past.layers = layers
    mask = torch.ones(rows, cached + 1, dtype=torch.long)
    for row in range(rows):
        mask[row, : (row * 7) % 48] = 0
    positions = mask[:, :cached].sum(-1, keepdim=True)  # the new token's position
    tokens = torch.randint(3, config.vocab_size, (rows, 1), generator=generator)
    contiguous_lm_head(model)

    def step(fused: FusedDecoder | None) -> float:
        start = time.perf_counter()
        decode_logits(model, fused, tokens, mask, positions, past)
        seconds = time.perf_counter() - start
        for layer in past.layers:  # back to `cached` columns: every step sees the same cache
            layer._length = cached
            layer.keys, layer.values = layer._keys[:, :, :cached], layer._values[:, :, :cached]
        return seconds * 1000

    times: dict[str, list[float]] = {"hf": [], "fused": []}
    with torch.inference_mode(), grouped_attention(model):
        step(None), step(decoder)  # warm-up
        for _ in range(repeats):
            times["hf"].append(step(None))
            times["fused"].append(step(decoder))
    hf, fused = statistics.median(times["hf"]), statistics.median(times["fused"])
    return {"rows": rows, "cached": cached, "repeats": repeats, "hf_forward_ms": round(hf, 1),
            "fused_ms": round(fused, 1), "speedup": round(hf / fused, 2),
            "fused_extra_mib": round(decoder.extra_bytes() / 2**20, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--steps", type=int, default=64, help="decode steps of the ms/step measurement")
    parser.add_argument("--cached", type=int, default=400, help="cached columns of the micro-measure")
    parser.add_argument("--micro-repeats", type=int, default=9)
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
        load_before = os.getloadavg()[0]
        micro = step_micro(model, batch, args.cached, args.micro_repeats)
        print(f"batch {batch} micro: {micro}", flush=True)
        hf = [hf_generate(model, tok, rows, args.max_new_tokens, stops, seed) for seed in range(args.repeats)]
        runs: dict[str, list[tuple[float, int]]] = {"engine_hf_forward": [], "engine": []}
        for seed in range(args.repeats):  # the two modes alternate
            for name, on in (("engine_hf_forward", False), ("engine", True)):
                with fused_mode(on):
                    runs[name].append(engine(model, rows, args.max_new_tokens, stops, chat.pad_id, seed))
        hf_s = sum(s for s, _ in hf)
        turns = batch * args.repeats
        entry: dict[str, Any] = {
            "prompt_tokens_mean": round(sum(map(len, rows)) / batch, 1),
            "hf_generate": {"seconds": round(hf_s, 2), "turns_per_second": round(turns / hf_s, 3),
                            "new_tokens": sum(t for _, t in hf)},
        }
        for name, done in runs.items():
            seconds = sum(s for s, _ in done)
            entry[name] = {"seconds": round(seconds, 2), "turns_per_second": round(turns / seconds, 3),
                           "new_tokens": sum(t for _, t in done), "speedup": round(hf_s / seconds, 2)}
        entry["speedup"] = entry["engine"]["speedup"]
        entry["speedup_hf_forward"] = entry["engine_hf_forward"]["speedup"]
        entry["aim_speedup"] = 4.0
        entry["decode_step"] = step_cost(model, rows, chat.pad_id, args.steps)
        # the speedup over `generate` if the engine's decoding cost nothing: both sides prefill alike
        entry["ceiling_speedup"] = round(hf_s / args.repeats / entry["decode_step"]["prefill_seconds"], 2)
        entry["decode_step_alone"] = micro
        entry["load_avg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
        results[f"batch_{batch}"] = entry
        print(f"batch {batch}: {results[f'batch_{batch}']}", flush=True)
        # written after every batch size: a long run stopped half-way keeps what it measured
        write_result("generation", {"model": args.model, "dtype": dtype, "threads": threads,
                                    "max_new_tokens": args.max_new_tokens, "temperature": TEMPERATURE,
                                    "top_p": TOP_P, "results": results, "peak_rss_mib": peak_rss_mib()})


if __name__ == "__main__":
    main()
