"""The charts the report draws itself from read numbers (the others are the stages' PNGs): pattern
shares (`sim_eval`, `label`) and learning curves (the `curve` points training stages recorded)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def pattern_chart(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], path: Path) -> Path:
    """Horizontal grouped bars: share of turns showing each pattern, per column (real first)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [r["pattern"] for r in rows]
    y = np.arange(len(names))
    height = 0.8 / max(1, len(columns))
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(names) + 1.4))
    for i, col in enumerate(columns):
        values = [r["values"].get(col) or 0.0 for r in rows]
        ax.barh(y - 0.4 + height * (i + 0.5), values, height, label=col)
    ax.set_yticks(y, [n.replace("_", " ") for n in names], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("share of user turns showing the pattern")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def curve_chart(panels: Sequence[tuple[str, Mapping[str, Sequence[tuple[float, float]]]]], path: Path,
                title: str) -> Path:
    """Learning curves: one panel per metric, one line per stage or variant, value against training step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows + 0.3), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (metric, lines) in zip(axes.flat, panels, strict=False):
        for label, points in lines.items():
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        ax.set_title(metric.replace("_", " "), fontsize=9)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    """The figure as a PNG at `path`, written atomically; the figure is closed."""
    import matplotlib.pyplot as plt

    from mimesis_rl.fsutil import atomic_open

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=96)
    plt.close(fig)
    return path
