"""Throughput, peak memory and quality of each pattern labeler on real chit-chat conversations (both views).

    python -m benchmarks.labelers [--pairs 100] [--threads 2] [--repeat 2] [--variants ...]

Each variant runs in its own child process (so peak RSS is its own) with `--threads` threads unless
it says otherwise, on the same conversations: the first `--pairs` chitchat pairs, both views, as the
`label` stage sees them. The embedding variants differ in the encoder: float32 (the baseline),
bfloat16, int8, bfloat16 on one thread, and `embedding_int8_before`, the encoder this project used
before (sentence-transformers, int8, every batch on all threads). Each fits its own classifiers and
ensemble on the gold train split (the classifier must match its encoder), is scored on the gold
test split, and labels the conversations `--repeat` times with an empty embedding cache.

Reported per variant: user turns per second (wall, labelling only; median and each repetition),
turns per CPU-second (steadier on a shared machine), peak RSS (fitting included), macro-F1 of the
embedding labeler and of its ensemble, and batch consistency (lowest cosine between a text encoded
alone and among others). Against float32 of the same run: speed ratios, identical decisions (per
pattern and per turn), macro-F1 change; against the previous encoder: speed-up.
`fastest_within_quality` names the fastest precision (at `--threads`) whose ensemble keeps macro-F1
>= 0.5 and within 0.01 of float32 and the same decisions as float32 on >= 99% of turns. The `llm`
labeler needs an endpoint and is reported as skipped. Timings on a shared 2-core machine are noisy.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from benchmarks._common import measure, peak_rss_mib, write_result

BASELINE = "embedding_float32"
PREVIOUS = "embedding_int8_before"
# name -> encoder settings (threads None: the run's --threads); `rules` has no encoder; PREVIOUS is the
# encoder this project used before (sentence-transformers + int8, all threads on each batch).
VARIANTS: dict[str, dict[str, Any]] = {
    "rules": {},
    "embedding_float32": {"precision": "float32"},
    PREVIOUS: {"precision": "int8"},
    "embedding_int8": {"precision": "int8"},
    "embedding_bfloat16": {"precision": "bfloat16"},
    "embedding_bfloat16_1thread": {"precision": "bfloat16", "threads": 1},
}
MIN_MACRO_F1, MAX_F1_DROP, MIN_SAME_TURNS = 0.5, 0.01, 0.99  # ensemble scores ~0.55 on the larger gold


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


def _config(settings: dict[str, Any], threads: int, model_dir: str) -> Any:
    """The project's label settings (params.yaml when present) with this variant's encoder settings."""
    from mimesis_rl.behavior.labelers import LabelSettings
    from mimesis_rl.config import load_params, project_root

    params_file = project_root() / "params.yaml"
    config = LabelSettings.from_params(load_params(params_file)) if params_file.exists() else LabelSettings()
    embedding = dataclasses.replace(config.embedding, threads=threads, **settings)
    return dataclasses.replace(config, model_dir=model_dir, embedding=embedding)


class PreviousEncoder:
    """The encoder as it was: `SentenceTransformer.encode` with int8 Linear layers, every batch on all
    torch threads; kept here only as the same-run reference for the speed-up."""

    def __init__(self, max_seq_length: int, batch_size: int) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        from mimesis_rl.behavior.labelers.encoder import default_model_path

        model = SentenceTransformer(str(default_model_path()), device="cpu")
        model.max_seq_length = max_seq_length
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> Any:
        import numpy as np

        unique = list(dict.fromkeys(texts))
        vectors = self.model.encode(
            unique, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        index = {text: i for i, text in enumerate(unique)}
        return np.asarray(vectors, dtype=np.float32)[[index[t] for t in texts]]

    def clear_cache(self) -> None:
        """It had none."""


def batch_consistency(encoder: Any, texts: list[str]) -> float:
    """Lowest cosine between a text encoded alone and the same text encoded among the others: below 1,
    a turn's labels depend on which other turns share its call (int8 dynamic quantisation scales each
    batch by its own range)."""
    import numpy as np

    encoder.clear_cache()
    alone = []
    for text in texts:
        alone.append(encoder.encode([text])[0])
        encoder.clear_cache()
    together = encoder.encode(texts)
    encoder.clear_cache()
    return float((np.stack(alone) * together).sum(1).min())


def _decisions(labels: list[Any]) -> Any:
    import numpy as np

    return np.array([[p in t.patterns for p in t.probabilities] for x in labels for t in x], dtype=bool)


def _timed(labeler: Any, conversations: list[Any], repeat: int) -> tuple[list[Any], list[dict[str, float]]]:
    runs = []
    for _ in range(repeat):
        for encoder in _encoders(labeler):
            encoder.clear_cache()  # every repetition encodes everything again
        wall, cpu = time.perf_counter(), time.process_time()
        labels = labeler.label(conversations)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        turns = sum(len(x) for x in labels)
        runs.append({"turns_per_s": turns / wall, "turns_per_cpu_s": turns / max(cpu, 1e-9), "seconds": wall})
    return labels, runs


def _encoders(labeler: Any) -> list[Any]:
    members = getattr(labeler, "members", {"self": labeler})
    return [m.encoder for m in members.values() if hasattr(m, "encoder")]


def _summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    return {
        "turns_per_s": round(statistics.median(r["turns_per_s"] for r in runs), 1),
        "turns_per_cpu_s": round(statistics.median(r["turns_per_cpu_s"] for r in runs), 1),
        "turns_per_s_runs": [round(r["turns_per_s"], 1) for r in runs],
        "turns_per_cpu_s_runs": [round(r["turns_per_cpu_s"], 1) for r in runs],
    }


def worker(name: str, pairs: int, threads: int, repeat: int, ensemble: bool, out: Path) -> None:
    import numpy as np
    import torch

    settings = dict(VARIANTS[name])
    threads = int(settings.pop("threads", None) or threads)
    torch.set_num_threads(threads)
    conversations = _conversations(pairs)
    record: dict[str, Any] = {"labeler": name, "threads": threads, "conversations": len(conversations)}
    if name == "rules":
        from mimesis_rl.behavior.labelers.rules import RulesLabeler

        labels, runs = _timed(RulesLabeler(_config({}, threads, "").rules_thresholds), conversations, repeat)
        np.save(out.with_suffix(".embedding.npy"), _decisions(labels))
    else:
        from mimesis_rl.behavior.evaluation import evaluate
        from mimesis_rl.behavior.gold import load_gold
        from mimesis_rl.behavior.labelers import fit_offline

        start = time.perf_counter()
        config = _config(settings, threads, "")
        encoder = None
        if name == PREVIOUS:
            encoder = PreviousEncoder(config.embedding.max_seq_length, config.embedding.batch_size)
        fitted = fit_offline(config, encoder=encoder)
        record["fit_seconds"] = round(time.perf_counter() - start, 2)
        texts = list(dict.fromkeys(t.content for c in conversations[:4] for t in c.turns))[:40]
        record["batch_consistency_min_cosine"] = round(batch_consistency(fitted.embedding.encoder, texts), 4)
        test = load_gold(split="test")
        record["macro_f1_embedding"] = round(evaluate(fitted.embedding, test).macro_f1, 4)
        record["macro_f1_ensemble"] = round(evaluate(fitted.ensemble, test).macro_f1, 4)
        labels, runs = _timed(fitted.embedding, conversations, repeat)
        np.save(out.with_suffix(".embedding.npy"), _decisions(labels))
        if ensemble:
            ensemble_labels, ensemble_runs = _timed(fitted.ensemble, conversations, repeat)
            record["ensemble"] = _summary(ensemble_runs)
        else:  # untimed: only its decisions, for agreement with the baseline
            ensemble_labels = fitted.ensemble.label(conversations)
        np.save(out.with_suffix(".ensemble.npy"), _decisions(ensemble_labels))
    record.update(
        user_turns=sum(len(x) for x in labels), **_summary(runs), peak_rss_mib_inside=peak_rss_mib()
    )
    out.write_text(json.dumps(record))


def _agreement(a: Any, b: Any) -> dict[str, float]:
    return {"decisions": round(float((a == b).mean()), 4), "turns": round(float((a == b).all(1).mean()), 4)}


def compare(results: dict[str, dict[str, Any]], decisions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each embedding variant against the float32 baseline of the same run."""
    base = results[BASELINE]
    out: dict[str, Any] = {}
    for name, r in results.items():
        if name == "rules" or name == BASELINE:
            continue
        out[name] = {
            "speedup": round(r["turns_per_s"] / base["turns_per_s"], 2),
            "cpu_speedup": round(r["turns_per_cpu_s"] / base["turns_per_cpu_s"], 2),
            "peak_rss_ratio": round(r["peak_rss_mib"] / base["peak_rss_mib"], 2),
            "same_as_float32_embedding": _agreement(
                decisions[name]["embedding"], decisions[BASELINE]["embedding"]
            ),
            "same_as_float32_ensemble": _agreement(
                decisions[name]["ensemble"], decisions[BASELINE]["ensemble"]
            ),
            "macro_f1_embedding_change": round(r["macro_f1_embedding"] - base["macro_f1_embedding"], 4),
            "macro_f1_ensemble_change": round(r["macro_f1_ensemble"] - base["macro_f1_ensemble"], 4),
        }
    return out


def fastest_within_quality(results: dict[str, dict[str, Any]], versus: dict[str, Any]) -> str | None:
    """The fastest precision (turns per CPU-second, the steadier number; at the run's threads) whose ensemble
    holds quality: macro-F1 and, turn by turn, the same decisions as float32."""
    floor = max(MIN_MACRO_F1, results[BASELINE]["macro_f1_ensemble"] - MAX_F1_DROP)

    def holds(name: str) -> bool:
        same = 1.0 if name == BASELINE else versus[name]["same_as_float32_ensemble"]["turns"]
        return results[name]["macro_f1_ensemble"] >= floor and same >= MIN_SAME_TURNS

    choices = [n for n in results if n not in ("rules", PREVIOUS) and "threads" not in VARIANTS[n]]
    return max((n for n in choices if holds(n)), key=lambda n: results[n]["turns_per_cpu_s"], default=None)


def feature_cost(pairs: int, threads: int, repeat: int) -> None:
    """CPU seconds per user turn of each part of the ensemble's labelling path, in one process on the same
    turns: the rules (run once, their scores also feed the embedding labeler), the MiniLM encoding (bf16,
    empty cache), the dialogue-act flags added for issue 11, and the linear models. The ratio says what
    the flags add to the `label` stage's labelling cost (fitting and cross-source refits are extra)."""
    import numpy as np
    import torch

    from mimesis_rl.behavior.context import user_turn_contexts
    from mimesis_rl.behavior.labelers.embedding import AGENT_WORDS, act_flags
    from mimesis_rl.behavior.labelers.encoder import SentenceEncoder
    from mimesis_rl.behavior.labelers.rules import RulesLabeler

    torch.set_num_threads(threads)
    contexts = [c for conv in _conversations(pairs) for _, c in user_turn_contexts(conv)]
    rules, encoder = RulesLabeler(), SentenceEncoder(precision="bfloat16")
    encoder.encode(["warm up: the model loads on first use"])
    users = [c.text for c in contexts]
    agents = [" ".join((c.last_agent or "").split()[-AGENT_WORDS:]) for c in contexts]

    def cpu(fn: Any) -> float:
        runs = []
        for _ in range(repeat):
            encoder.clear_cache()
            start = time.process_time()
            fn()
            runs.append(time.process_time() - start)
        return statistics.median(runs) / len(contexts)

    x = np.random.default_rng(0).random((len(contexts), 3 * 384 + 13 + 25)).astype(np.float32)
    w = np.random.default_rng(1).random((x.shape[1], 13)).astype(np.float32)
    parts = {
        "rules": cpu(lambda: rules.predict_proba(contexts)),
        "encoder": cpu(lambda: encoder.encode(users + [a for a in agents if a])),
        "act_flags": cpu(lambda: act_flags(contexts)),
        "linear_models": cpu(lambda: x @ w),
    }
    before = parts["rules"] + parts["encoder"] + parts["linear_models"]
    write_result(
        "labelers_features",
        {
            "pairs": pairs,
            "user_turns": len(contexts),
            "threads": threads,
            "repeat": repeat,
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "cpu_ms_per_turn": {k: round(v * 1000, 4) for k, v in parts.items()},
            "labelling_cost_ratio_with_act_flags": round((before + parts["act_flags"]) / before, 3),
            "demo_estimate_extra_cpu_s_for_135k_turns": round(parts["act_flags"] * 135_000, 1),
            "note": "process CPU time (steadier than wall time on a shared machine); ratio within one run",
        },
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.labelers")
    parser.add_argument(
        "--feature-cost", action="store_true", help="only the per-turn CPU cost of each labelling part"
    )
    parser.add_argument("--pairs", type=int, default=100, help="chitchat pairs (x2 views) to label")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2, help="timed labelling passes per variant")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ensemble", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.feature_cost:
        feature_cost(args.pairs, args.threads, args.repeat)
        return
    if args.worker:
        worker(args.worker, args.pairs, args.threads, args.repeat, args.ensemble, Path(args.out))
        return

    import numpy as np

    from mimesis_rl.behavior.labelers import LabelSettings

    default = f"embedding_{LabelSettings().embedding.precision}"
    variants = list(dict.fromkeys([BASELINE, *args.variants]))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": str(args.threads),
        "MKL_NUM_THREADS": str(args.threads),
    }
    results: dict[str, Any] = {}
    decisions: dict[str, dict[str, Any]] = {}
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp:
        for name in variants:
            out = Path(tmp) / f"{name}.json"
            cmd = [sys.executable, "-m", "benchmarks.labelers", "--worker", name, "--out", str(out)]
            cmd += ["--pairs", str(args.pairs), "--threads", str(args.threads), "--repeat", str(args.repeat)]
            cmd += ["--ensemble"] if name == default else []
            usage = measure(cmd, env=env)
            results[name] = {
                **json.loads(out.read_text()),
                "peak_rss_mib": usage["peak_rss_mib"],
                "process_seconds": usage["seconds"],
            }
            decisions[name] = {
                kind: np.load(out.with_suffix(f".{kind}.npy"))
                for kind in ("embedding", "ensemble")
                if out.with_suffix(f".{kind}.npy").exists()
            }
            r = results[name]
            print(
                f"{name:28s} {r['turns_per_s']:8.1f} turns/s {r['turns_per_cpu_s']:8.1f} turns/cpu-s "
                f"{usage['peak_rss_mib']:7.1f} MiB  F1 emb/ens {r.get('macro_f1_embedding', '-')}"
                f"/{r.get('macro_f1_ensemble', '-')}",
                flush=True,
            )
    versus = compare(results, decisions)
    write_result(
        "labelers",
        {
            "pairs": args.pairs,
            "threads": args.threads,
            "repeat": args.repeat,
            "load_average_before_after": [load_before, [round(x, 2) for x in os.getloadavg()]],
            "aim": "embedding >= 500 turns/s on 2 cores",
            "default_variant": default,
            "labelers": results,
            "llm": "skipped: needs an OpenAI-compatible endpoint (OPENAI_BASE_URL); "
            "its speed is the endpoint's",
            "versus_float32": versus,
            "fastest_within_quality": fastest_within_quality(results, versus),
            "quality_rule": f"ensemble macro-F1 >= {MIN_MACRO_F1} and >= float32's - {MAX_F1_DROP}, "
            f"and the same decisions as float32 on >= {MIN_SAME_TURNS:.0%} of turns",
            "speedup_vs_previous_default": {
                name: {
                    "wall": round(results[name]["turns_per_s"] / results[PREVIOUS]["turns_per_s"], 2),
                    "cpu": round(results[name]["turns_per_cpu_s"] / results[PREVIOUS]["turns_per_cpu_s"], 2),
                }
                for name in results
                if name != "rules" and PREVIOUS in results
            },
            "note": "shared 2-core machine: other processes compete for the cores, so turns_per_s depends on "
            "their load; turns_per_cpu_s is the steadier number. Peak RSS includes fitting on the gold set.",
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
