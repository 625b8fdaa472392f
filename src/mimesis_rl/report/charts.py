"""The one chart the report draws itself (the others are the stages' PNGs): pattern shares, from
the numbers `sim_eval` and `label` wrote."""

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

    from mimesis_rl.fsutil import atomic_open

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
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=96)
    plt.close(fig)
    return path
