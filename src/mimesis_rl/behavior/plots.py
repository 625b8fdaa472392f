"""PNG figures of the labelers' evaluation and of the pattern distribution (matplotlib, no display)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mimesis_rl.behavior.evaluation import CONFUSION_LABELS, EvalReport  # noqa: E402
from mimesis_rl.data.schema import PATTERN_NAMES  # noqa: E402
from mimesis_rl.fsutil import atomic_open  # noqa: E402


def _save(fig: plt.Figure, path: str | Path) -> Path:
    path = Path(path)
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_confusion(report: EvalReport, path: str | Path) -> Path:
    """Rows: gold pattern; columns: predicted pattern on the same turns, as a share of the row's turns."""
    counts = report.confusion.astype(float)
    shares = counts / np.maximum(report.row_support, 1.0)[:, None]
    fig, ax = plt.subplots(figsize=(9, 8))
    image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(CONFUSION_LABELS)), CONFUSION_LABELS, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(CONFUSION_LABELS)), CONFUSION_LABELS, fontsize=8)
    for i in range(len(CONFUSION_LABELS)):
        for j in range(len(CONFUSION_LABELS)):
            if counts[i, j]:
                ax.text(
                    j,
                    i,
                    int(counts[i, j]),
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if shares[i, j] > 0.6 else "black",
                )
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(
        f"{report.labeler}: gold vs predicted patterns (test, n={report.n_items}, "
        f"macro-F1 {report.macro_f1:.2f})"
    )
    fig.colorbar(image, ax=ax, fraction=0.04, label="share of the gold row's turns")
    return _save(fig, path)


def plot_f1(reports: Sequence[EvalReport], path: str | Path) -> Path:
    """Per-pattern F1 of every labeler (a heatmap with the values written in)."""
    values = np.array([[r.per_pattern[name]["f1"] for name in PATTERN_NAMES] for r in reports])
    fig, ax = plt.subplots(figsize=(11, 1.0 + 0.6 * len(reports)))
    ax.imshow(values, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(PATTERN_NAMES)), PATTERN_NAMES, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(reports)), [f"{r.labeler} ({r.macro_f1:.2f})" for r in reports])
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7)
    ax.set_title("F1 per pattern on the gold test split (macro-F1 in brackets)")
    return _save(fig, path)


def plot_distribution(
    by_source: Mapping[str, Mapping[str, float]],
    by_domain: Mapping[str, Mapping[str, float]],
    path: str | Path,
    max_domains: int = 8,
) -> Path:
    """Share of user turns showing each pattern, one bar per source (top) and per domain (bottom)."""
    fig, axes = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
    domains = sorted(by_domain, key=lambda d: -by_domain[d].get("user_turns", 0))[:max_domains]
    for ax, table, keys, title in (
        (axes[0], by_source, sorted(by_source), "by source"),
        (axes[1], by_domain, domains, f"by domain (top {len(domains)})"),
    ):
        width = 0.8 / max(len(keys), 1)
        x = np.arange(len(PATTERN_NAMES))
        for i, key in enumerate(keys):
            turns = int(table[key].get("user_turns", 0))
            ax.bar(
                x - 0.4 + (i + 0.5) * width,
                [table[key].get(name, 0.0) for name in PATTERN_NAMES],
                width,
                label=f"{key} ({turns} user turns)",
            )
        ax.set_ylabel("share of user turns")
        ax.set_title(f"Pattern distribution {title}")
        ax.legend(fontsize=7)
    axes[1].set_xticks(np.arange(len(PATTERN_NAMES)), PATTERN_NAMES, rotation=45, ha="right", fontsize=8)
    return _save(fig, path)


def plot_cross_source(results: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """Cross-source macro-F1 of every labeler per held-out source, with its 95% interval: overlapping
    bars are labelers the gold set cannot tell apart. `results`: labeler -> source -> SourceReport."""
    names = list(results)
    sources = sorted({src for per in results.values() for src in per})
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.45 * len(names) * max(len(sources), 1)))
    row = 0
    ticks, labels = [], []
    for src in sources:
        for name in names:
            rep = results[name].get(src)
            if rep is None:
                continue
            ci = rep.interval
            if ci is not None:
                ax.plot(ci, [row, row], color="tab:blue", linewidth=2)
            ax.plot([rep.macro_f1], [row], "o", color="tab:blue")
            ticks.append(row)
            labels.append(f"{name}, {src} held out ({len(rep.scored)} patterns)")
            row += 1
        row += 0.5
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("macro-F1 on the held-out source (95% bootstrap interval over its dialogues)")
    ax.set_title("Cross-source macro-F1")
    return _save(fig, path)
