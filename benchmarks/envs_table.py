"""Scripted-agent success per domain against the scripted panel members (the README table).

    python -m benchmarks.envs_table [--n 200] [--seed 0] [--max-turns 4 --domains campsite --name NAME]

For every domain, the domain's competent scripted agent plays N dialogues (seeds seed…seed+N-1)
against every scripted panel member: the training users (cooperative, train_mix), the
over-cooperative baseline (tell_all) and the unseen scripted users. Ratios are against the
cooperative user measured in the same run. `--max-turns` plays the agent under a turn budget (the
agents' evaluation uses 4: the ceiling a learned agent is read against). Pure Python, no model;
timings are wall-clock on a shared CPU, so treat dialogues/second as noisy.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks._common import peak_rss_mib, write_result
from mimesis_rl.envs.panel import default_panel
from mimesis_rl.envs.table import hardest, success_table

BASELINE = "scripted-cooperative"


def markdown(table: dict[str, dict[str, dict[str, Any]]], unseen: list[str], n: int) -> str:
    """The compact table (README) and the full per-member table."""
    short = {name: name.removeprefix("scripted-") for row in table.values() for name in row}
    lines = [
        f"Scripted agent success rate over {n} dialogues per cell (mean reward in brackets).",
        "",
        "| domain | cooperative (train) | tell-all (baseline) | train-mix (train) | unseen mean "
        "| hardest unseen |",
        "|---|---|---|---|---|---|",
    ]
    for domain, row in table.items():
        mean_unseen = sum(row[m]["success_rate"] for m in unseen) / len(unseen)
        name, worst = hardest(row, unseen)

        def cell(member: str, row: dict[str, dict[str, Any]] = row) -> str:
            return f"{row[member]['success_rate']:.2f} ({row[member]['mean_reward']:.2f})"

        lines.append(
            f"| {domain} | {cell(BASELINE)} | {cell('scripted-tell-all')} | {cell('scripted-train-mix')} | "
            f"{mean_unseen:.2f} | {worst:.2f} ({short[name]}) |"
        )
    members = list(next(iter(table.values())))
    lines += [
        "",
        "| domain | " + " | ".join(short[m] for m in members) + " |",
        "|---|" + "---|" * len(members),
    ]
    for domain, row in table.items():
        lines.append(f"| {domain} | " + " | ".join(f"{row[m]['success_rate']:.2f}" for m in members) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="dialogues per (domain, member) cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-turns", type=int, help="the agent's turn budget (default: each domain's own)")
    parser.add_argument("--domains", help="comma-separated domains (default: all 8)")
    parser.add_argument("--name", default="envs_table", help="results/<name>.json")
    args = parser.parse_args(argv)

    panel = default_panel()
    members = [m.name for m in panel.members if m.kind == "scripted"]
    unseen = [m.name for m in panel.by_role("unseen") if m.kind == "scripted"]
    start = time.perf_counter()
    domains = args.domains.split(",") if args.domains else None
    table = success_table(n=args.n, seed=args.seed, domains=domains, members=members, panel=panel,
                          max_turns=args.max_turns)
    seconds = time.perf_counter() - start
    dialogues = args.n * len(members) * len(table)
    ratios = {
        d: {
            m: round(row[m]["success_rate"] / row[BASELINE]["success_rate"], 4)
            if row[BASELINE]["success_rate"]
            else None
            for m in members
        }
        for d, row in table.items()
    }
    text = markdown(table, unseen, args.n)
    write_result(
        args.name,
        {
            "n_per_cell": args.n,
            "seed": args.seed,
            "max_turns": args.max_turns,
            "baseline": BASELINE,
            "roles": {m.name: m.role for m in panel.members if m.kind == "scripted"},
            "table": table,
            "success_ratio_vs_baseline": ratios,
            "seconds": round(seconds, 2),
            "dialogues": dialogues,
            "dialogues_per_second": round(dialogues / seconds, 1),
            "peak_rss_mib": peak_rss_mib(),
            "markdown": text,
        },
    )
    print()
    print(text)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
