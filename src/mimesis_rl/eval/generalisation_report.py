"""The generalisation report: one heatmap per agent (members x environments) and the markdown
tables of `generalisation.md`, from the result `tasks.agent_eval` assembles. Reads, never measures."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def heatmap(result: Mapping[str, Any], agent: str, path: str | Path, metric: str = "success_rate") -> Path:
    """Members x environments for one agent (success rate by default), numbers in the cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mimesis_rl.fsutil import atomic_open

    members, envs = result["members"], result["envs"]
    grid = np.full((len(members), len(envs)), np.nan)
    for cell in result["cells"]:
        if cell["agent"] == agent and cell[metric] is not None:
            grid[members.index(cell["member"]), envs.index(cell["env"])] = cell[metric]
    fig, ax = plt.subplots(figsize=(1.1 * len(envs) + 3, 0.38 * len(members) + 1.6))
    image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(envs)), envs, rotation=30, ha="right")
    ax.set_yticks(range(len(members)), members)
    for i in range(len(members)):
        for j in range(len(envs)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if grid[i, j] < 0.5 else "black")
    n = result["settings"]["dialogues_per_cell"]
    ax.set_title(f"{agent}: {metric.replace('_', ' ')} on unseen simulators ({n} dialogue(s) per cell)")
    fig.colorbar(image, ax=ax, fraction=0.03)
    fig.tight_layout()
    path = Path(path)
    with atomic_open(path, "wb", encoding=None) as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)
    return path


def _fmt(value: float | None, ci: Sequence[float] | None = None, digits: int = 2) -> str:
    if value is None:
        return "–"
    text = f"{value:+.{digits}f}" if ci is not None and value < 0 else f"{value:.{digits}f}"
    if ci is not None and not any(math.isnan(c) for c in ci):
        text += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return text


def markdown(result: Mapping[str, Any]) -> str:
    """The generalisation report in words and tables."""
    s = result["settings"]
    lines = [
        "# Agent generalisation to unseen simulators",
        "",
        f"{len(result['agents'])} agent(s) x {len(result['members'])} unseen simulator(s) x "
        f"{len(result['envs'])} environment(s), {s['dialogues_per_cell']} dialogue(s) per cell, seeds "
        f"{result['seeds'][0]}..{result['seeds'][-1]} for every agent (paired). Brackets: "
        f"{int(s['confidence'] * 100)}% bootstrap intervals ({s['bootstrap']} resamples; differences "
        "resample matched dialogue pairs).",
        "",
    ]
    for miss in result.get("missing_agents", []):
        lines.append(f"- agent **{miss['name']}** not evaluated: {miss['reason']}")
    for miss in result.get("skipped_members", []):
        lines.append(f"- simulator **{miss['name']}** not in the matrix: {miss['reason']}")
    per_agent_cost = result.get("cost", {}).get("per_agent", {})
    twins = {a: c["same_as"] for a, c in per_agent_cost.items() if "same_as" in c}
    for a, twin in twins.items():
        lines.append(f"- agent **{a}** has the same folder fingerprint as **{twin}** (weights, tokenizer, "
                     f"format): greedy, it plays {twin}'s dialogues, reused, not replayed")
    if result.get("missing_agents") or result.get("skipped_members") or twins:
        lines.append("")
    lines += ["## Per agent (all unseen simulators)", "",
              "| Agent | trained on | success | reward | turns to success | clarifying q. | "
              "actions before private known | acted before known |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for a in result["agents"]:
        p = result["per_agent"][a]
        b = p["behaviour"]
        lines.append(f"| {a} | {result['trained_on'].get(a, '')} | "
                     f"{_fmt(p['success_rate'], p['success_ci'])} | "
                     f"{_fmt(p['mean_reward'], p['reward_ci'])} | {_fmt(b['turns_to_success'])} | "
                     f"{_fmt(b['clarifying_questions'])} | {_fmt(b['actions_before_private_known'])} | "
                     f"{_fmt(b['acted_before_private_known_rate'])} |")
    lines += ["", "## Success rate per unseen simulator", "",
              "| Simulator | " + " | ".join(result["agents"]) + " |",
              "|---|" + "---:|" * len(result["agents"])]
    per = {(r["agent"], r["member"]): r for r in result["per_member"]}
    for m in result["members"]:
        lines.append(f"| {m} | " + " | ".join(
            _fmt(per[(a, m)]["success_rate"], per[(a, m)]["success_ci"]) for a in result["agents"]) + " |")
    for comp in result["comparisons"].values():
        title = comp.get("title") or f"{comp['a']} − {comp['b']}"
        lines += ["", f"## {title}", ""]
        if not comp["measured"]:
            lines.append(f"Not measured: {', '.join(comp['missing'])} not evaluated.")
            continue
        o = comp["overall"]
        lines += [f"{comp['a']} better on **{comp['better']} of {comp['of']}** unseen simulators "
                  f"({comp['better_clear']} with the interval above 0, {comp['worse_clear']} below). "
                  f"Mean over simulators of the paired difference in {comp['metric']}: "
                  f"{_fmt(o['diff'], o['ci'], 3)} — {o['verdict']}.", "",
                  f"| Simulator | {comp['a']} − {comp['b']} ({comp['metric']}) | verdict |", "|---|---:|---|"]
        for r in comp["per_member"]:
            lines.append(f"| {r['member']} | {_fmt(r['diff'], r['ci'], 3)} | {r['verdict']} |")
    c = result["cost"]
    lines += ["", "## Cost", "",
              f"{c['dialogues']} dialogues in {c['seconds']:.0f} s ({c['seconds_per_dialogue']:.2f} s per "
              f"dialogue; {c['cpu']}, load {c['load']})."]
    maps = ", ".join(f"`{Path(p).name}`" for p in result.get("heatmaps", {}).values())
    lines += ["", f"Heatmaps: {maps}", ""]
    return "\n".join(lines)
