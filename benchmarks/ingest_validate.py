"""Ingest + validate of the whole chitchat corpus (both views), and a no-op `dvc repro`.

    python -m benchmarks.ingest_validate

Aims (issue 2): ingest + validate under 60 s and 2 GiB on 2 cores; a no-op `dvc repro` after a
full one under 15 s. Baseline in the same run: a bare `json.load` of the packaged corpus file.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from benchmarks._common import copy_checkout, measure, write_result
from mimesis_rl.config import set_profile

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    env = dict(os.environ, DVC_NO_ANALYTICS="1", GX_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="mimesis-bench-") as tmp:
        tmp_path = Path(tmp)
        env = _env()
        env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path / 'mlflow.db'}"
        load_json = ("import json, chitchat_dataset, os; json.load(open(os.path.join("
                     "os.path.dirname(chitchat_dataset.__file__), 'dataset.json')))")
        baseline = measure([sys.executable, "-c", load_json], env=env)
        mimesis = str(BIN / "mimesis")
        raw, valid, bad = tmp_path / "raw.jsonl", tmp_path / "valid.jsonl", tmp_path / "bad.jsonl"
        ingest = measure([mimesis, "data", "ingest", "--adapter", "chitchat", "--input", "embedded",
                          "--output", str(raw)], env=env)
        validate = measure([mimesis, "data", "validate", "--input", str(raw), "--output", str(valid),
                            "--quarantine", str(bad), "--report-dir", str(tmp_path / "report")], env=env)
        conversations = sum(1 for _ in raw.open())

        project = copy_checkout(ROOT, tmp_path / "project")
        set_profile("tiny", project / "params.yaml")
        full = measure([str(BIN / "dvc"), "repro", "split"], cwd=project, env=env)
        noop = measure([str(BIN / "dvc"), "repro", "split"], cwd=project, env=env)

    total = ingest["seconds"] + validate["seconds"]
    write_result("ingest_validate", {
        "conversations": conversations,
        "json_load_baseline": baseline,
        "ingest": ingest,
        "validate": validate,
        "ingest_plus_validate_seconds": round(total, 2),
        "ratio_to_json_load": round(total / baseline["seconds"], 1),
        "peak_rss_mib": max(ingest["peak_rss_mib"], validate["peak_rss_mib"]),
        "aims": {"seconds": 60, "peak_rss_mib": 2048, "noop_repro_seconds": 15},
        "tiny_dvc_repro_until_split": full,
        "noop_dvc_repro": noop,
    })


if __name__ == "__main__":
    main(sys.argv[1:])
