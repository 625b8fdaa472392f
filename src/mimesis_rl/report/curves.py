"""Learning curves: the points training stages recorded at 0, ¼, ½ and all of their steps (`curve` in
their metrics files, read by `eval.evidence.read_curves`), drawn as value against step.

Shared by the evidence stage (PNGs in reports/evidence, linked from claims.md) and the one-page report
(a section that appears whenever a stage recorded curve points, whatever the profile).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mimesis_rl.eval.evidence import read_curves, split_curves
from mimesis_rl.report.charts import curve_chart
from mimesis_rl.report.inputs import image
from mimesis_rl.report.sections import Section
from mimesis_rl.report.settings import ReportSettings

CHART_FILES = {"simulator": "simulator_curves.png", "agents": "agent_curves.png"}
AGENT_METRICS = ("success_rate", "mean_reward", "acted_rate")  # greedy success first: the claim's number
SKIP = ("step", "seconds")  # `seconds`: what the evaluation point cost, not a learning curve
CONTINUES = {"sim_rl": "sim_sft"}  # GRPO starts from the SFT model: drawn after its last step


def _label(stage: str) -> str:
    """`agent_rl@mimesis` -> `mimesis`; a stage without a variant keeps its name."""
    return stage.split("@", 1)[1] if "@" in stage else stage


Panels = list[tuple[str, dict[str, list[tuple[float, float]]]]]


def panels(group: str, stages: Mapping[str, Sequence[Mapping[str, float]]],
           continues: Mapping[str, str] = CONTINUES) -> Panels:
    """One panel per metric (agents: success, reward, acted rate when recorded), one line per stage; a
    stage that continues another's model (`continues`: stage -> parent) is drawn from where the
    parent's steps end."""
    keys = sorted({k for pts in stages.values() for p in pts for k in p if k not in SKIP})
    if group == "agents":
        keys = [k for k in AGENT_METRICS if k in keys] or keys
    offset = {stage: max((p["step"] for p in stages[parent]), default=0)
              for stage, parent in continues.items() if stage in stages and parent in stages}
    out = []
    for key in keys:
        lines = {_label(stage): [(offset.get(stage, 0) + p["step"], p[key]) for p in pts if key in p]
                 for stage, pts in stages.items()}
        lines = {k: v for k, v in lines.items() if v}
        if lines:
            out.append((key, lines))
    return out


TITLES = {"simulator": "Simulator: its own evaluation against its training steps",
          "agents": "Agents: greedy evaluation against their training steps"}


def draw(curves: Mapping[str, Mapping[str, Sequence[Mapping[str, float]]]], folder: Path) -> dict[str, Path]:
    """The PNGs for the groups that have points ({group: path}); none drawn for a group without."""
    out = {}
    for group, stages in curves.items():
        chart = panels(group, stages)
        if chart:
            out[group] = curve_chart(chart, folder / CHART_FILES[group], TITLES[group])
    return out


def curves_section(settings: ReportSettings, assets: Path, report_dir: Path) -> Section | None:
    """The report's curves section, or None when no stage recorded curve points (nothing to show)."""
    curves = split_curves(read_curves(settings.metrics))
    if not any(curves.values()):
        return None
    pngs = draw(curves, assets)
    embed = settings.images == "embed"
    charts = [img for group, path in pngs.items()
              if (img := image(path, report_dir, TITLES[group], embed)) is not None]
    tables: list[dict[str, Any]] = []
    for stages in curves.values():
        for stage, points in stages.items():
            keys = sorted({k for p in points for k in p if k not in SKIP})
            rows = [{"step": int(p["step"]), "values": [p.get(k) for k in keys]} for p in points]
            tables.append({"stage": stage, "keys": keys, "rows": rows})
    return Section("curves", {"charts": charts, "tables": tables, "source": settings.metrics})
