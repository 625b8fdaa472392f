"""Throughput and peak memory of each pattern labeler on real chit-chat conversations (both views).

    python -m benchmarks.labelers [--pairs 100] [--threads 2]

Each labeler runs in its own child process (so peak RSS is its own), pinned to `--threads` torch
threads, on the same conversations: the first `--pairs` chitchat pairs, both views, as the `label`
stage sees them. Reported per labeler: user turns per second (wall, labelling only, after loading),
turns per CPU-second (less sensitive to other load on a shared machine), load seconds and peak RSS.
Baseline in the same run: the embedding labeler with an fp32 encoder (`embedding_fp32`), against
which the int8-quantised default is compared (speed ratio and share of identical decisions).
The `llm` labeler needs an endpoint and is reported as skipped without one. Timings on a shared
2-core machine are noisy: rerun before drawing conclusions.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import measure, peak_rss_mib, write_result

LABELERS = ("rules", "embedding_fp32", "embedding", "ensemble")


def _conversations(pairs: int) -> list[Any]:
    from mimesis_rl.data.adapters import get_adapter
    from mimesis_rl.data.schema import Conversation

    out, seen = [], set()
    for item in get_adapter("chitchat").read("embedded"):
        if not isinstance(item, Conversation):
            continue
        pair = item.persona["pair_id"] if item.persona else item.conversation_id
        if pair not in seen and len(seen) >= pairs:
            break
        seen.add(pair)
        out.append(item)
    return out


def _labeler(name: str, threads: int) -> Any:
    from mimesis_rl.behavior.labelers import LabelConfig, build_labeler
    from mimesis_rl.config import load_params, project_root

    params_file = project_root() / "params.yaml"
    config = LabelConfig.from_params(load_params(params_file)) if params_file.exists() else LabelConfig()
    config = dataclasses.replace(
        config,
        model_dir=str(project_root() / config.model_dir),
        embedding=dataclasses.replace(config.embedding, threads=threads),
    )
    if name != "embedding_fp32":
        return build_labeler(name, config)
    from mimesis_rl.behavior.labelers.embedding import EmbeddingLabeler

    fitted = build_labeler("embedding", config)
    assert isinstance(fitted, EmbeddingLabeler)
    fp32 = dataclasses.replace(fitted.config, quantize=False, threads=threads)
    return EmbeddingLabeler(fitted.linear, fitted.platt, fitted.thresholds, fp32)


def worker(name: str, pairs: int, threads: int, out: Path) -> None:
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    conversations = _conversations(pairs)
    start = time.perf_counter()
    labeler = _labeler(name, threads)
    if hasattr(labeler, "encoder"):
        labeler.encoder.encode(["warm up"])  # model load is a one-off, not throughput
    elif hasattr(labeler, "members"):
        for member in labeler.members.values():
            if hasattr(member, "encoder"):
                member.encoder.encode(["warm up"])
    load = time.perf_counter() - start
    wall, cpu = time.perf_counter(), time.process_time()
    labels = labeler.label(conversations)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    turns = sum(len(x) for x in labels)
    decisions = np.array([[p in t.patterns for p in t.probabilities] for x in labels for t in x], dtype=bool)
    np.save(out.with_suffix(".npy"), decisions)
    out.write_text(
        json.dumps(
            {
                "labeler": name,
                "conversations": len(conversations),
                "user_turns": turns,
                "turns_per_s": round(turns / wall, 1),
                "turns_per_cpu_s": round(turns / max(cpu, 1e-9), 1),
                "label_seconds": round(wall, 2),
                "cpu_seconds": round(cpu, 2),
                "load_seconds": round(load, 2),
                "peak_rss_mib_inside": peak_rss_mib(),
            }
        )
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.labelers")
    parser.add_argument("--pairs", type=int, default=100, help="chitchat pairs (x2 views) to label")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.pairs, args.threads, Path(args.out))
        return

    import numpy as np

    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": str(args.threads),
        "MKL_NUM_THREADS": str(args.threads),
    }
    results: dict[str, Any] = {}
    decisions: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in LABELERS:
            out = Path(tmp) / f"{name}.json"
            cmd = [
                sys.executable,
                "-m",
                "benchmarks.labelers",
                "--worker",
                name,
                "--pairs",
                str(args.pairs),
                "--threads",
                str(args.threads),
                "--out",
                str(out),
            ]
            usage = measure(cmd, env=env)
            results[name] = {
                **json.loads(out.read_text()),
                "peak_rss_mib": usage["peak_rss_mib"],
                "process_seconds": usage["seconds"],
            }
            decisions[name] = np.load(out.with_suffix(".npy"))
            print(
                f"{name:15s} {results[name]['turns_per_s']:8.1f} turns/s  "
                f"{results[name]['turns_per_cpu_s']:8.1f} turns/cpu-s  {usage['peak_rss_mib']:7.1f} MiB",
                flush=True,
            )
    base, fast = results["embedding_fp32"], results["embedding"]
    comparison = {
        "embedding_int8_vs_fp32_speedup": round(fast["turns_per_s"] / base["turns_per_s"], 2),
        "embedding_int8_vs_fp32_cpu_speedup": round(fast["turns_per_cpu_s"] / base["turns_per_cpu_s"], 2),
        "embedding_int8_vs_fp32_same_decisions": round(
            float((decisions["embedding"] == decisions["embedding_fp32"]).mean()), 4
        ),
        "ensemble_vs_rules_slowdown": round(
            results["rules"]["turns_per_s"] / results["ensemble"]["turns_per_s"], 2
        ),
    }
    load = os.getloadavg()
    write_result(
        "labelers",
        {
            "pairs": args.pairs,
            "threads": args.threads,
            "load_average_1m_5m_15m": [round(x, 2) for x in load],
            "aim": "embedding >= 500 turns/s on 2 cores",
            "labelers": results,
            "llm": "skipped: needs an OpenAI-compatible endpoint (OPENAI_BASE_URL); "
            "its speed is the endpoint's",
            "comparison": comparison,
            "note": "shared machine: other processes compete for the 2 cores; "
            "turns_per_cpu_s is the steadier number",
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
