"""sim_eval's generation at two batch sizes: the same held-out turns (the stage's own selection)
answered by a trained simulator in length-sorted batches of 16 and of 64, one process, in turn.

    python -m benchmarks.sim_eval_batch --project PATH [--simulator models/simulator/rl] [--turns 128]

Needs a project where `make run` has finished (its held-out split, base and simulator); run from
anywhere. Writes benchmarks/results/sim_eval_batch.json (seconds per batch size, their ratio, load).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks._common import peak_rss_mib, write_result

RUN_BY_DEFAULT = False  # needs a project where `make run` has finished


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", required=True, help="a checkout where `make run` has finished")
    parser.add_argument("--simulator", default="models/simulator/rl")
    parser.add_argument("--turns", type=int, default=128)
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

    from mimesis_rl.eval.fidelity import records_for, select
    from mimesis_rl.eval.fidelity_run import read_heldout
    from mimesis_rl.eval.fidelity_settings import FidelitySettings
    from mimesis_rl.simulator.runtime import UserSimulator
    from mimesis_rl.threads import set_threads

    project = Path(args.project).resolve()
    os.chdir(project)  # the simulator names its base relative to the project
    threads = set_threads(args.threads)
    conversations, _ = read_heldout(project / "data/processed/conversations/test.jsonl")
    settings = FidelitySettings(max_turns=args.turns, turns_per_conversation=4, max_context_tokens=384)
    prompts = [r.prompt for r in records_for(select(conversations, settings))]
    runs = []
    for batch in args.batches:
        simulator = UserSimulator.load(project / args.simulator, name="bench", batch_size=batch,
                                       base_model=project / "models/base", max_context_tokens=384)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        simulator.reply(prompts, seed=0)
        runs.append({"batch": batch, "seconds": round(time.perf_counter() - start, 1), "load_avg_1m": load})
        print(runs[-1], flush=True)
        del simulator
    base = runs[0]["seconds"]
    write_result("sim_eval_batch", {
        "threads": threads, "turns": len(prompts),
        "simulator": args.simulator, "runs": runs,
        "speedup_vs_first": {str(r["batch"]): round(base / r["seconds"], 2) for r in runs},
        "peak_rss_mib": peak_rss_mib()})


if __name__ == "__main__":
    main()
