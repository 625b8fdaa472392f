"""Where `sim_rl`'s memory goes: peak RSS of the stage, and per phase, on the demo profile.

    python -m benchmarks.sim_memory --project DIR [--src SRC] [--label after] [--steps 2]
        [--trainer '{"per_device_train_batch_size": 4}'] [--cheap-rewards] [--malloc-arena-max 2]

DIR is a project folder that holds what `sim_rl` reads on the demo profile (params.yaml,
data/processed/conversations, models/base, models/simulator/sft, models/labeler). The stage runs in
a child process (`python -m tasks.sim_rl` semantics, through the stage runner) with `--steps` GRPO
steps; a sampler thread reads the child's RSS every 50 ms and charges it to the phase running then:
prompts, loading the policy, the SFT simulator's discriminator samples, the behaviour labeler,
GRPO generation + scoring, GRPO loss + backward. `--src` runs another checkout's code (e.g. the
commit before a change, unpacked with `git archive`) against the same data, so before/after share
one machine and one load. Results go to benchmarks/results/sim_memory.json under `--label`, beside
earlier labels; the CPU model and load averages are recorded with each.

One lever at a time: `--trainer` overrides GRPOConfig options of the project's `sim_rl.trainer` for
this run only (the project's params.yaml is restored afterwards); `--cheap-rewards` leaves out the
realism discriminator (and its SFT samples) and the pattern-fidelity labeler, so a run is mostly the
GRPO step (use it to compare levers with each other, not with a full run); `--malloc-arena-max`
sets glibc's MALLOC_ARENA_MAX for the child.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS_DIR, cpu_model, machine, measure

ROOT = Path(__file__).resolve().parents[1]


def _rss_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class PhaseSampler:
    """RSS sampled in a thread, the maximum charged to the innermost phase running at the time."""

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self.stack = ["setup"]
        self.peaks: dict[str, float] = {}
        self.entered: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._note()
            time.sleep(self.period)

    def _note(self) -> None:
        rss, name = _rss_mib(), self.stack[-1]
        self.peaks[name] = max(self.peaks.get(name, 0.0), rss)

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        original = getattr(owner, attr)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self._note()
            self.entered.setdefault(name, round(_rss_mib(), 1))
            self.stack.append(name)
            try:
                return original(*args, **kwargs)
            finally:
                self._note()
                self.stack.pop()

        setattr(owner, attr, wrapped)

    def __enter__(self) -> PhaseSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def child(project: str, out: str, code: str) -> None:
    """Run `code`'s sim_rl stage in `project` with phase sampling; write the profile to `out`."""
    import resource

    os.chdir(project)
    sys.path[:0] = [str(Path(code) / "src"), code]
    import trl

    import mimesis_rl.simulator.rl as rl
    import mimesis_rl.simulator.runtime as runtime
    from tasks import sim_rl
    from tasks._runner import main

    sampler = PhaseSampler()
    for attr, name in (("build_prompts", "prompts"), ("fit_discriminator", "discriminator_samples"),
                       ("pattern_predictor", "labeler"), ("_policy", "load_policy"),
                       ("load_trainable_adapter", "load_policy")):
        if hasattr(rl, attr):
            sampler.wrap(rl, attr, name)
    load = runtime.UserSimulator.__dict__["load"].__func__
    runtime.UserSimulator.load = classmethod(
        lambda cls, *a, **k: _timed(sampler, "load_sft_simulator", load, cls, *a, **k))
    sampler.wrap(trl.GRPOTrainer, "_generate_and_score_completions", "grpo_generate_and_score")
    sampler.wrap(trl.GRPOTrainer, "compute_loss", "grpo_loss")
    sampler.wrap(trl.GRPOTrainer, "training_step", "grpo_step_other")  # backward, optimizer
    start = time.perf_counter()
    with sampler:
        metrics = main(sim_rl.STAGE, sim_rl.run, sim_rl.inputs, argv=["--params", "params.yaml"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(out).write_text(json.dumps({
        "seconds": round(time.perf_counter() - start, 1), "peak_rss_mib": round(peak, 1),
        "phase_peak_rss_mib": {k: round(v, 1) for k, v in sampler.peaks.items()},
        "phase_rss_at_entry_mib": sampler.entered, "steps": metrics.get("steps"),
        "prompts": metrics.get("prompts")}))


def _timed(sampler: PhaseSampler, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    sampler._note()
    sampler.entered.setdefault(name, round(_rss_mib(), 1))
    sampler.stack.append(name)
    try:
        return fn(*args, **kwargs)
    finally:
        sampler._note()
        sampler.stack.pop()




def _cpu_flags() -> list[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return sorted(f for f in flags if f.startswith(("avx512_bf16", "amx", "avx512f")))
    except OSError:
        pass
    return []


def set_steps(project: Path, steps: int, trainer: dict[str, Any] | None = None,
              cheap_rewards: bool = False) -> None:
    """Cap GRPO at `steps` in the project's params (either params layout: `trainer:` or flat), with
    `trainer` options over the profile's, and realism + pattern fidelity off with `cheap_rewards`."""
    import yaml

    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    section = params["sim_rl"]
    options = {"max_steps": steps, **(trainer or {})}
    if isinstance(section.get("trainer"), dict):
        section["trainer"].update(options)
    else:
        section.update(options)
    if cheap_rewards:
        section["rewards"] = {**(section.get("rewards") or {}), "realism": 0.0, "pattern_fidelity": 0.0}
    for profile in (params.get("profiles") or {}).values():
        sub = (profile or {}).get("sim_rl") or {}
        for key in options:
            sub.pop(key, None)
            (sub.get("trainer") or {}).pop(key, None)
        if cheap_rewards:
            sub.pop("rewards", None)
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def run(project: Path, src: Path | None, label: str, steps: int, trainer: dict[str, Any] | None = None,
        cheap_rewards: bool = False, malloc_arena_max: int | None = None) -> dict[str, Any]:
    params = project / "params.yaml"
    original = params.read_text()
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", DO_NOT_TRACK="1", MLFLOW_TRACKING_URI=f"sqlite:///{project}/mlflow.db")
    if malloc_arena_max:
        env["MALLOC_ARENA_MAX"] = str(malloc_arena_max)
    code = (src or ROOT).resolve()
    env["PYTHONPATH"] = os.pathsep.join([str(code / "src"), str(code)])
    load_before = os.getloadavg()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    try:
        set_steps(project, steps, trainer, cheap_rewards)
        usage = measure([sys.executable, "-m", "benchmarks.sim_memory", "--child", str(project), "--out", out,
                         "--code", str(code)], cwd=ROOT, env=env)
    finally:
        params.write_text(original)
    profile = json.loads(Path(out).read_text())
    os.unlink(out)
    return {**profile, "wait4_peak_rss_mib": usage["peak_rss_mib"], "code": str(code),
            "grpo_steps": steps, "trainer_overrides": trainer or {}, "cheap_rewards": cheap_rewards,
            "malloc_arena_max": malloc_arena_max, "cpu_model": cpu_model(), "cpu_flags": _cpu_flags(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "note": "shared 2-core machine, other engineers' jobs running; RSS is not timing, but the "
                    "allocator's behaviour under load can move it a little"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project")
    parser.add_argument("--src", default=None, help="checkout whose code runs (default: this one)")
    parser.add_argument("--label", default="after")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--trainer", default=None, help="JSON: GRPOConfig options, this run")
    parser.add_argument("--cheap-rewards", action="store_true", help="no realism discriminator, no labeler")
    parser.add_argument("--malloc-arena-max", type=int, default=None)
    parser.add_argument("--child", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--code", default=str(ROOT))
    args = parser.parse_args()
    if args.child:
        child(args.child, args.out, args.code)
        return
    if not args.project:
        parser.error("--project is required")
    trainer = json.loads(args.trainer) if args.trainer else None
    result = run(Path(args.project).resolve(), Path(args.src) if args.src else None, args.label, args.steps,
                 trainer, args.cheap_rewards, args.malloc_arena_max)
    path = RESULTS_DIR / "sim_memory.json"
    record = json.loads(path.read_text()) if path.exists() else {"benchmark": "sim_memory", "runs": {}}
    record["runs"][args.label] = {**result, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    record["machine"] = machine()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["runs"][args.label], indent=2))


if __name__ == "__main__":
    main()
