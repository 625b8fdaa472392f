"""Shared benchmark plumbing: time a child process with its peak memory; write results JSON."""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def measure(cmd: list[str], cwd: str | Path | None = None,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `cmd` to completion; wall seconds and the child's peak RSS (MiB), from wait4's rusage."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    output = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code != 0:
        raise RuntimeError(f"benchmark command failed ({code}): {' '.join(cmd)}\n{output[-3000:]}")
    return {"seconds": round(seconds, 3), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def peak_rss_mib() -> float:
    """This process's peak RSS so far, in MiB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu_model() -> str:
    """The CPU's model name: speed ratios only compare within one run on one machine."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
            "cpu_model": cpu_model(), "load_avg_1m": round(os.getloadavg()[0], 2),
            "torch_threads": _torch_threads()}


def _torch_threads() -> int | None:
    try:
        import torch

        return torch.get_num_threads()
    except ImportError:
        return None


def write_result(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = {"benchmark": name, "time": stamp, "machine": machine(), **payload}
    path.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
    print(json.dumps(record, indent=2))
    return path


def copy_checkout(src: Path, dest: Path) -> Path:
    """A fresh git repo at `dest` holding this checkout's files (tracked + untracked, not ignored)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=src,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    for rel in listed:
        if (src / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "copy"]):
        subprocess.run(cmd, cwd=dest, check=True, capture_output=True)
    return dest


# The agent_rl settings that size a rollout round: recorded beside every agent/CSD timing.
ROLLOUT_SETTING_KEYS = ("domains", "batch_size", "num_generations", "max_turns", "agent_max_new_tokens",
                        "user_max_new_tokens")
