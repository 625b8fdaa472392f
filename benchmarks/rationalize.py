"""Template reasoning traces over the whole chitchat corpus (both views), and CaSiNo when present.

    python -m benchmarks.rationalize

Baseline in the same run: a schema round trip of the same conversations (parse every record, dump it
back), which is what the stage costs without writing any reasoning. Also timed: the Great
Expectations output check over the written file. Timings on a shared 2-core machine are noisy.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import peak_rss_mib, write_result
from mimesis_rl.behavior.reasoning import TemplateRationalizer
from mimesis_rl.behavior.reasoning.expectations import check_reasoning_output
from mimesis_rl.behavior.reasoning.metrics import trace_metrics
from mimesis_rl.data.adapters import get_adapter
from mimesis_rl.data.jsonl import read_conversations, write_jsonl
from mimesis_rl.data.schema import Conversation

CASINO = Path(__file__).resolve().parents[2] / "shared" / "data" / "casino" / "casino_train.json"


def _corpus(adapter: str, source: str | Path) -> list[Conversation]:
    return [c for c in get_adapter(adapter).read(source) if isinstance(c, Conversation)]


def _run(name: str, conversations: list[Conversation], tmp: Path) -> dict[str, Any]:
    raw, out = tmp / f"{name}.raw.jsonl", tmp / f"{name}.out.jsonl"
    write_jsonl(raw, conversations)
    start = time.perf_counter()
    write_jsonl(tmp / f"{name}.copy.jsonl", read_conversations(raw))
    baseline = time.perf_counter() - start

    start = time.perf_counter()
    done = TemplateRationalizer(seed=0).rationalize(read_conversations(raw))
    write_jsonl(out, done)
    stage = time.perf_counter() - start

    start = time.perf_counter()
    check = check_reasoning_output([out])
    gx_seconds = time.perf_counter() - start
    metrics = trace_metrics(done)
    turns = metrics["user_turns"]
    return {
        "conversations": len(done),
        "round_trip_baseline_seconds": round(baseline, 2),
        "rationalize_seconds": round(stage, 2),
        "ratio_to_baseline": round(stage / baseline, 2),
        "user_turns_per_second": round(turns / stage, 1),
        "gx_check_seconds": round(gx_seconds, 2),
        "gx_success": check.success,
        **{k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()},
    }


def main(argv: list[str]) -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mimesis-bench-rationalize-") as tmp:
        results["chitchat"] = _run("chitchat", _corpus("chitchat", "embedded"), Path(tmp))
        if CASINO.exists():
            results["casino_train"] = _run("casino", _corpus("casino", CASINO), Path(tmp))
    write_result("rationalize", {**results, "peak_rss_mib": peak_rss_mib(),
                                 "note": "shared 2-core machine; timings are noisy"})


if __name__ == "__main__":
    main(sys.argv[1:])
