"""The environment part's report: the markdown section of `fidelity.md` (one row per user side and
domain), the heatmap, the log's headline lines and each simulator against the bar for an
agent-training environment. Reads an `EnvironmentRun`, never plays."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mimesis_rl.eval.environment_metrics import REFERENCE, EnvironmentRun


def fmt_rate(value: float | None) -> str:
    """Two decimals, `–` for none (the log's and the headline's numbers)."""
    return "–" if value is None else f"{value:.2f}"


ENV_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("success_rate", "Success ↑", "{:.2f}"),
    ("success_ratio", "÷ reference ↑", "{:.2f}"),
    ("mean_reward", "Reward ↑", "{:.2f}"),
    ("reward_ratio", "Reward ÷ ref ↑", "{:.2f}"),
    ("contradiction_rate", "Contradictions / user turn ↓", "{:.3f}"),
    ("contradiction_resample_rate", "Contradictions caught / turn", "{:.3f}"),
    ("turns_to_want", "Turns to want ↓", "{:.1f}"),
    ("want_never_share", "Want never stated ↓", "{:.2f}"),
    ("verbatim_repeats", "Verbatim ×3 ↓", "{:d}"),
    ("reasoning_share", "Turns with reasoning ↑", "{:.2f}"),
    ("role_break_rate", "Role breaks / turn ↓", "{:.3f}"),
    ("repeat_resample_rate", "3rd copies re-sampled / turn ↓", "{:.3f}"),
    ("invalid_end_share", "Invalid-turn endings ↓", "{:.2f}"),
    ("closed_at_budget_share", "Reasoning closed by budget ↓", "{:.2f}"),
    ("card_agreement", "Decides as its card ↑", "{:.2f}"),
    ("card_yes_rate", "Yes where its card says yes ↑", "{:.2f}"),
    ("card_neither_rate", "Neither yes nor no there ↓", "{:.2f}"),
    ("card_false_yes_rate", "Yes where its card says no ↓", "{:.2f}"),
    ("user_turns", "User turns", "{:d}"),
)


def _cell(row: Mapping[str, Any], key: str, fmt: str) -> str:
    value = row.get(key)
    if value is None:
        return "–"
    return fmt.format(int(value)) if fmt == "{:d}" else fmt.format(float(value))


def env_table(run: EnvironmentRun) -> str:
    """Markdown: one row per user side × domain, plus an `all` row per user side."""
    header = "| User side | Domain | " + " | ".join(t for _, t, _ in ENV_COLUMNS) + " |"
    rule = "|---|---|" + "|".join("---:" for _ in ENV_COLUMNS) + "|"
    lines = [header, rule]
    for name, rows in run.rows.items():
        for domain, row in rows.items():
            lines.append(
                f"| {name} | {domain} | " + " | ".join(_cell(row, k, f) for k, _, f in ENV_COLUMNS) + " |"
            )
        overall = run.overall[name]
        lines.append(
            f"| **{name}** | **all** | " + " | ".join(_cell(overall, k, f) for k, _, f in ENV_COLUMNS) + " |"
        )
    return "\n".join(lines)


HEATMAP_PANELS = (
    ("success_rate", "success rate", 0.0, 1.0, "RdYlGn"),
    ("mean_reward", "mean reward", 0.0, 1.0, "RdYlGn"),
    ("contradiction_rate", "contradictions / user turn", 0.0, 0.2, "RdYlGn_r"),
    ("reasoning_share", "user turns with reasoning", 0.0, 1.0, "RdYlGn"),
)


def heatmap(run: EnvironmentRun, path: str | Path) -> Path:
    """User sides × domains, one panel per headline metric (grey = not available)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mimesis_rl.fsutil import atomic_open

    names = list(run.rows)
    domains = list(run.settings.get("domains") or next(iter(run.rows.values()), {}))
    fig, axes = plt.subplots(
        1, len(HEATMAP_PANELS), figsize=(4.2 * len(HEATMAP_PANELS), 0.6 * len(names) + 2.2)
    )
    for ax, (key, title, low, high, cmap) in zip(axes, HEATMAP_PANELS, strict=True):
        grid = np.array(
            [
                [np.nan if run.rows[n].get(d, {}).get(key) is None else run.rows[n][d][key] for d in domains]
                for n in names
            ],
            dtype=float,
        )
        colours = plt.get_cmap(cmap).copy()
        colours.set_bad("#dddddd")
        ax.imshow(np.ma.masked_invalid(grid), cmap=colours, vmin=low, vmax=high, aspect="auto")
        ax.set_xticks(range(len(domains)), domains, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.set_title(title, fontsize=9)
        for i in range(len(names)):
            for j in range(len(domains)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7)
    fig.suptitle("Scripted agent vs each user side, per domain (same seeds)", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
    return path


def env_markdown(run: EnvironmentRun, png_name: str = "environment.png") -> list[str]:
    """The report section (lines) for `fidelity.md`."""
    s = run.settings
    cost = ", ".join(f"{n} {sec:.0f} s" for n, sec in run.seconds.items())
    return [
        "## As an environment: the scripted agent against each simulator",
        "",
        f"{len(s.get('seeds', []))} seeded dialogue(s) per domain (seeds {s.get('seeds')}), the same "
        f"for every user side; agent `{s.get('agent')}`, "
        f"at most {s.get('max_turns') or 'the domain’s'} agent turns. "
        f"`{REFERENCE}` is the user side `{s.get('reference')}`. Wall time: {cost}.",
        "",
        env_table(run),
        "",
        "Contradictions: user turns stating a goal-slot value the card does not hold (word values of the "
        "domain's other cards, numbers stated with the slot's name), as delivered; caught: samples the "
        "runtime re-sampled for contradicting the card (a turn where every sample did is delivered). "
        "Turns to want: first user turn that "
        "names what the user is after (mean over dialogues where it is named). Verbatim ×3: a message "
        "repeated a third time in a row as delivered; 3rd copies re-sampled: the runtime caught one and "
        "re-sampled it, per user turn. Role breaks: outputs re-sampled for breaking the user role, per "
        "user turn. Invalid-turn endings: dialogues the simulator ended because no valid turn came. "
        "Decides as its card: of the proposals the dialogues met, the replies that agree with the card "
        "user's decision in the same state (a reply that says neither yes nor no is a no, as the "
        "environment reads it); yes / neither: where the card accepts, the replies read as a yes, and "
        "those that said neither.",
        "",
        f"![environment]({png_name})",
        "",
        *verdict_lines(run),
    ]


def headline(run: EnvironmentRun) -> list[str]:
    """One plain line per simulator for the log (a measurement: nothing fails on it)."""
    lines = []
    for name, overall in run.overall.items():
        lines.append(
            f"{name}: success {fmt_rate(overall.get('success_rate'))} (min ratio to reference over domains "
            f"{fmt_rate(overall.get('min_success_ratio'))}), "
            f"contradictions/turn {fmt_rate(overall.get('contradiction_rate'))}, "
            f"verbatim x3 {overall.get('verbatim_repeats')}, "
            f"reasoning share {fmt_rate(overall.get('reasoning_share'))}, "
            f"invalid endings {fmt_rate(overall.get('invalid_end_share'))}"
        )
    return lines


# The bar for a simulator to train agents against (issue 15, "Done when"): measured, not enforced.
BAR = (
    "success ≥ ½ of the reference's in every domain, contradictions ≤ 5% of user turns, no turn repeated "
    "verbatim 3× in a row, reasoning on every user turn"
)


def shortfalls(run: EnvironmentRun) -> dict[str, list[str]]:
    """Per simulator, where it falls short of `BAR` (empty list: it meets it)."""
    out: dict[str, list[str]] = {}
    for name, overall in run.overall.items():
        if name == REFERENCE:
            continue
        short = []
        low = [
            d
            for d, row in run.rows[name].items()
            if row.get("success_ratio") is not None and row["success_ratio"] < 0.5
        ]
        if low:
            short.append(f"success below half the reference's in {', '.join(low)}")
        rate = overall.get("contradiction_rate")
        if rate is not None and rate > 0.05:
            short.append(f"contradictions on {rate:.1%} of user turns")
        if overall.get("verbatim_repeats"):
            short.append(f"{overall['verbatim_repeats']} verbatim triple repeat(s)")
        share = overall.get("reasoning_share")
        if share is not None and share < 1.0:
            short.append(f"reasoning on {share:.0%} of user turns")
        out[name] = short
    return out


def verdict_lines(run: EnvironmentRun) -> list[str]:
    """Markdown lines: each simulator against `BAR`."""
    lines = [f"Against the bar for an agent-training environment ({BAR}):", ""]
    for name, short in shortfalls(run).items():
        lines.append(f"- {name}: " + ("meets it" if not short else "short: " + "; ".join(short)))
    return [*lines, ""]
