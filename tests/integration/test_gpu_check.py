"""The GPU check's code path without a GPU: `--smoke` trains sim_sft, sim_rl and agent_rl (tiny shape,
CPU, one process per stage, as on CUDA) and writes their numbers; a failing stage makes the run exit 1
while the other stages' numbers are still written; the MFU arithmetic and the peak table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import gpu_check

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_smoke_trains_every_stage_and_writes_the_numbers(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO),
                                                        os.environ.get("PYTHONPATH", "")]),
           "MIMESIS_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--smoke", "--out", str(out),
                           "--work", str(tmp_path / "work")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    record = json.loads(out.read_text())
    assert record["ok"] and record["mode"] == "smoke" and record["failed"] == []
    assert record["machine"]["torch"] and record["machine"]["cpu_model"]
    assert record["prepare"]["ok"] and record["prepare"]["vocab"] == record["shape"]["vocab_size"]
    assert set(record["stages"]) == set(gpu_check.STAGES)
    for name, stage in record["stages"].items():
        assert stage["ok"], (name, stage)
        assert stage["steps"] == gpu_check.STEPS[name][1], name
        assert stage["tokens"] > 0 and stage["tokens_per_s"] > 0, name
        assert stage["final_loss"] is not None and stage["mean_seq_len"] > 0, name
        assert 0 < stage["trainable_params"] < stage["params"], name  # LoRA over the base
        assert stage["shape"]["num_hidden_layers"] == record["shape"]["num_hidden_layers"]
    assert record["stages"]["agent_rl"]["user"].startswith("learned:")  # the sim_rl simulator plays the user
    for line in ("gpu_check: sim_sft ok", "gpu_check: sim_rl ok", "gpu_check: agent_rl ok"):
        assert line in proc.stdout


def test_a_failing_stage_exits_1_and_keeps_the_other_numbers(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_prepare(work: Path, smoke: bool) -> dict[str, Any]:
        (work / "sim_sft" / "adapter").mkdir(parents=True)
        return {"ok": True}

    def fake_child(stage: str, args: Any, work: Path, timeout: float) -> dict[str, Any]:
        if stage == "sim_rl":
            return {"ok": False, "error": "RuntimeError: CUDA out of memory", "log_tail": "Traceback ..."}
        return {"ok": True, "steps": 3, "tokens_per_s": 1000.0, "params": 10**8, "trainable_params": 10**6,
                "mean_seq_len": 300.0, "gradient_checkpointing": False,
                "shape": {"hidden_size": 576, "num_hidden_layers": 30, "vocab_size": 49152}}

    monkeypatch.setattr(gpu_check, "prepare", fake_prepare)
    monkeypatch.setattr(gpu_check, "run_child", fake_child)
    out = tmp_path / "gpu.json"
    args = gpu_check.parse(["--smoke", "--out", str(out), "--work", str(tmp_path / "w")])
    assert gpu_check.parent(args) == 1
    record = json.loads(out.read_text())
    assert not record["ok"] and record["failed"] == ["sim_rl"]
    assert record["stages"]["sim_rl"]["error"] == "RuntimeError: CUDA out of memory"
    assert record["stages"]["sim_sft"]["tokens_per_s"] == 1000.0
    assert record["stages"]["agent_rl"]["ok"]  # still run after the failure


def test_mfu_arithmetic_and_peak_table() -> None:
    assert gpu_check.peak_tflops("NVIDIA H200") == (989.0, True)
    assert gpu_check.peak_tflops("NVIDIA H100 PCIe")[0] == 756.0
    assert gpu_check.peak_tflops("Some Future GPU") == (gpu_check.FALLBACK_TFLOPS, False)
    n = 134_515_008
    full = gpu_check.train_flops_per_token(n, n, 30, 576, 0.0, recompute=False)
    assert full == pytest.approx(6 * n)  # full fine-tuning without attention: the textbook 6N
    lora = gpu_check.train_flops_per_token(n, 10**6, 30, 576, 512.0, recompute=True)
    assert lora == pytest.approx(3 * (2 * n + 2 * 30 * 576 * 512) + 2 * 10**6)
    result = {"tokens_per_s": 100_000.0, "params": n, "trainable_params": 10**6, "mean_seq_len": 512.0,
              "gradient_checkpointing": True, "shape": {"hidden_size": 576, "num_hidden_layers": 30}}
    gpu_check.add_mfu(result, 989.0)
    assert result["mfu"] == pytest.approx(lora * 1e5 / 989e12, rel=1e-3)
    assert result["mfu_6n"] == pytest.approx(6 * n * 1e5 / 989e12, rel=1e-3)


def test_stopped_by_the_outer_limit_keeps_what_was_measured(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """gpu_check.sh's `timeout` sends SIGTERM: the current child is killed, the JSON still written."""
    monkeypatch.setattr(gpu_check, "prepare", lambda work, smoke: {"ok": True})

    def fake_child(stage: str, args: Any, work: Path, timeout: float) -> dict[str, Any]:
        if stage == "sim_sft":
            (work / "sim_sft" / "adapter").mkdir(parents=True)
            return {"ok": True, "steps": 3, "tokens_per_s": 500.0}
        raise KeyboardInterrupt("signal 15")

    monkeypatch.setattr(gpu_check, "run_child", fake_child)
    out = tmp_path / "gpu.json"
    args = gpu_check.parse(["--smoke", "--out", str(out), "--work", str(tmp_path / "w")])
    assert gpu_check.parent(args) == 1
    record = json.loads(out.read_text())
    assert record["interrupted"].startswith("signal 15") and record["failed"] == ["interrupted"]
    assert record["stages"]["sim_sft"]["tokens_per_s"] == 500.0 and "sim_rl" not in record["stages"]
