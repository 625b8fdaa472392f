"""The fidelity report: one table comparing simulators (assistant baseline, SFT-only, SFT+RL, ...),
as markdown and as a PNG chart of the Fidelity Index components."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimesis_rl.eval.fidelity_metrics import COMPONENTS
from mimesis_rl.fsutil import atomic_open, write_text

COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("fidelity_index", "Fidelity Index ↑", "{:.1f}"),
    ("behaviour_fidelity", "Behaviour fidelity (1-JSD) ↑", "{:.3f}"),
    ("pattern_macro_f1", "Pattern macro-F1 ↑", "{:.3f}"),
    ("turing_distance", "Turing distance ↓", "{:.1f}"),
    ("cluster_jsd", "Embedding cluster JSD ↓", "{:.3f}"),
    ("first_turn_distinct2_sim", "First-turn distinct-2", "{:.3f}"),
    ("goal_adherence", "Goal adherence ↑", "{:.3f}"),
    ("termination_f1", "Termination F1 ↑", "{:.3f}"),
    ("sim_leave_rate", "Leave rate", "{:.2f}"),
    ("role_adherence_rate", "Role adherence ↑", "{:.3f}"),
    ("refusal_rate", "Refusal rate ↓", "{:.3f}"),
    ("perplexity", "Perplexity (real turns) ↓", "{:.1f}"),
    ("sim_mean_words", "Words per turn", "{:.1f}"),
)


# The turn format and the user role: what an agent meeting this simulator would run into.
FORMAT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("clean_share", "Clean parse ↑", "{:.1%}"),
    ("repaired_share", "Repaired", "{:.1%}"),
    ("closed_at_budget_share", "Closed by budget", "{:.1%}"),
    ("rejected_sample_share", "Rejected sample", "{:.1%}"),
    ("rejected_after_resample_share", "Rejected after re-sample ↓", "{:.1%}"),
    ("role_break_share", "Role breaks (re-sampled) ↓", "{:.1%}"),
    ("opening_leave_share", "Left at opening (re-sampled) ↓", "{:.1%}"),
    ("refusal_rate", "Refusals delivered ↓", "{:.1%}"),
    ("sim_leave_rate", "Leave rate (sim)", "{:.1%}"),
    ("learned_leave_share", "of which by the leave model", "{:.1%}"),
    ("real_leave_rate", "Leave rate (real)", "{:.1%}"),
    ("sim_leave_rate_per_turn", "Per random turn (sim)", "{:.1%}"),
    ("real_leave_rate_per_turn", "Per random turn (real)", "{:.1%}"),
    ("termination_f1", "Termination F1 ↑", "{:.3f}"),
)

# Opening turns on their own (the cue "[chat opened]" must read as an event, not text to riff on).
OPENING_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("opening_turns", "Openings", "{:.0f}"),
    ("opening_turing_distance", "Opening Turing distance ↓", "{:.1f}"),
    ("opening_cue_echoes", "Echo / riff on the cue ↓", "{:.0f}"),
    ("opening_rejected", "Rejected ↓", "{:.0f}"),
    ("first_turn_distinct2_sim", "Distinct-2", "{:.3f}"),
    ("opening_sim_mean_words", "Words (sim)", "{:.1f}"),
    ("opening_real_mean_words", "Words (real)", "{:.1f}"),
    ("opening_sim_leave_rate", "Leaves at once", "{:.1%}"),
)

INTERVALS = {"turing_distance": "turing_distance_ci", "behaviour_fidelity": "behaviour_fidelity_ci",
             "opening_turing_distance": "opening_turing_distance_ci"}


def _cell(metrics: Mapping[str, Any], key: str, fmt: str) -> str:
    value = metrics.get(key)
    if value is None:
        return "–"
    interval = metrics.get(INTERVALS.get(key, ""))
    text = fmt.format(value)
    return text + f" [{fmt.format(interval[0])}, {fmt.format(interval[1])}]" if interval else text


def table(results: Mapping[str, Mapping[str, Any]],
          columns: tuple[tuple[str, str, str], ...] = COLUMNS) -> str:
    """Markdown table: one row per simulator."""
    header = "| Simulator | " + " | ".join(title for _, title, _ in columns) + " |"
    rule = "|---|" + "|".join("---:" for _ in columns) + "|"
    rows = [f"| {name} | " + " | ".join(_cell(m, key, fmt) for key, _, fmt in columns) + " |"
            for name, m in results.items()]
    return "\n".join([header, rule, *rows])


def verdict(results: Mapping[str, Mapping[str, Any]], baseline: str = "assistant", sft: str = "sft-only",
            final: str = "sft+rl") -> list[str]:
    """Plain statements on the issue's criteria (the final simulator vs the assistant baseline)."""
    lines = []
    if baseline not in results or final not in results:
        return lines
    for key, lower_better, title in (("turing_distance", True, "Turing distance"),
                                     ("behaviour_fidelity", False, "behaviour fidelity")):
        b, f = results[baseline].get(key), results[final].get(key)
        if b is None or f is None:
            lines.append(f"- {title}: not available")
            continue
        better = f < b if lower_better else f > b
        b_ci, f_ci = results[baseline].get(INTERVALS[key]), results[final].get(INTERVALS[key])
        clear = ""
        if better and b_ci and f_ci:
            apart = f_ci[1] < b_ci[0] if lower_better else f_ci[0] > b_ci[1]
            clear = " (95% intervals apart)" if apart else " (95% intervals overlap: within noise)"
        between = ""
        s = results.get(sft, {}).get(key)
        if s is not None:
            inside = min(b, f) <= s <= max(b, f)
            between = f"; {sft} ({s:.3f}) is {'between them' if inside else 'outside that range'}"
        lines.append(f"- {title}: {final} {f:.3f} vs {baseline} {b:.3f} — "
                     f"{'better' if better else 'NOT better'}{clear}{between}")
    return lines


def chart(results: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Grouped bars of the Fidelity Index components (0..1, higher = closer to real users)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(results)
    x = np.arange(len(COMPONENTS))
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(10, 4))
    for i, name in enumerate(names):
        comps = results[name].get("components", {})
        values = [comps.get(c) if comps.get(c) is not None else 0.0 for c in COMPONENTS]
        fi = results[name].get("fidelity_index", 0.0)
        ax.bar(x + i * width - 0.4 + width / 2, values, width, label=f"{name} (FI {fi:.1f})")
    ax.set_xticks(x, COMPONENTS, rotation=20)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (1 = like real users)")
    ax.set_title("Simulator fidelity against held-out real users")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)
    return path


def render(results: Mapping[str, Mapping[str, Any]], out_dir: str | Path, data: str = "",
           weights: Mapping[str, float] | None = None,
           environment: list[str] | None = None) -> tuple[Path, Path]:
    """Write `fidelity.md` and `fidelity.png` into `out_dir` (`environment`: the environment part's
    section, lines of markdown)."""
    out_dir = Path(out_dir)
    png = chart(results, out_dir / "fidelity.png")
    lines = ["# Simulator fidelity", ""]
    if data:
        lines += [f"Held-out data: `{data}`", ""]
    first = next(iter(results.values()), {})
    if first.get("turns"):
        real_words = first.get("real_mean_words")
        n_conv = int(first.get("conversations", 0))
        lines += [f"{int(first['turns'])} real user turns of {n_conv} conversations"
                  + (f"; real users write {real_words:.1f} words per turn" if real_words is not None else "")
                  + (f" and leave on {first['real_leave_rate']:.0%} of these turns"
                     if first.get("real_leave_rate") is not None else "") + ".", ""]
    lines += [table(results), "",
              "Brackets: 95% bootstrap intervals over held-out conversations. Turing distance is "
              "cross-fitted (each turn scored by a discriminator that never saw its conversation).", "",
              "![components](fidelity.png)", "",
              "## Turn format and user role", "",
              "Per sampled output: clean, repaired (e.g. reasoning closed for it), rejected (then "
              "re-sampled), role breaks (assistant-style talk, the card said back, narrating \"the user\"; "
              "re-sampled), left at opening (an answer to the opening cue that leaves; re-sampled). "
              "Per turn: still unusable after re-sampling (in a dialogue this ends the session with a "
              "recorded reason). Leave rate: share of the evaluated turns on which the user leaves (by "
              "its own end marker, or drawn from the simulator's learned leave model: next column). The "
              "evaluated turns include every conversation's last one, so real users leave on more of "
              "them than on a random turn; \"per random turn\" weights each evaluated turn by the "
              "inverse of its chance to be picked, which estimates both rates on a random turn.", "",
              table(results, FORMAT_COLUMNS), "",
              "## Opening turns", "",
              "The first user turn of each held-out conversation, answered to the opening cue. Opening "
              "Turing distance: the cross-fitted discriminator scores restricted to openings. Echo / riff: "
              "openings that repeat the cue or talk about \"the conversation\" / \"first message\".", "",
              table(results, OPENING_COLUMNS), ""]
    for name, metrics in results.items():
        for echo in metrics.get("opening_cue_echo_examples") or []:
            lines.append(f"- {name} echoes the cue: {echo[:160]!r}")
    if any(m.get("opening_cue_echo_examples") for m in results.values()):
        lines.append("")
    if environment:
        lines += environment
    statements = verdict(results)
    if statements:
        lines += ["## Against the assistant baseline", "", *statements, ""]
    if weights:
        lines += ["## Fidelity Index", "",
                  "FI = 100 · Σ wᵢ·sᵢ / Σ wᵢ over the available components (see "
                  "`mimesis_rl.eval.fidelity_metrics`), weights: "
                  + ", ".join(f"{k} {v}" for k, v in weights.items()), ""]
    for name, metrics in results.items():
        sample = metrics.get("examples") or []
        if not sample:
            continue
        lines += [f"## Examples: {name}", ""]
        for ex in sample[:3]:
            lines += [f"- agent: {ex['agent'] or '(opening)'}", f"  - real: {ex['real']}",
                      f"  - simulated: {ex['simulated'] or '(rejected output)'}"]
        lines.append("")
    md = out_dir / "fidelity.md"
    write_text(md, "\n".join(lines))
    return md, png
