"""The report's sections: each reads its stage's files into the data both templates render, or says
which input is missing. The sample dialogues are in `report.dialogues`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.fsutil import read_json
from mimesis_rl.report.cells import cut, fmt, verdict_class, with_ci
from mimesis_rl.report.charts import pattern_chart
from mimesis_rl.report.inputs import image
from mimesis_rl.report.settings import ReportSettings

NOT_PRODUCED = "not produced by this run"
SECTIONS = ("validation", "patterns", "fidelity", "dialogues", "generalisation", "claims", "promotion")
TITLES = {
    "validation": "1. Data validation",
    "patterns": "2. Behaviour patterns: real vs simulated",
    "fidelity": "3. Simulator fidelity",
    "dialogues": "4. Sample dialogues",
    "generalisation": "5. Generalisation to unseen simulators",
    "curves": "6. Learning curves",  # only when a training stage recorded curve points (report.curves)
    "claims": "The paper's claims, measured",
    "promotion": "Promotion gate",
}


@dataclass
class Section:
    """One part of the report: `missing` says why it is absent (then nothing else is shown)."""

    key: str
    data: dict[str, Any] = field(default_factory=dict)
    missing: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return TITLES[self.key]

    @property
    def produced(self) -> bool:
        return self.missing is None


def missing(key: str, *paths: str | Path) -> Section:
    return Section(key, missing=f"{NOT_PRODUCED}: {', '.join(f'`{p}`' for p in paths)} not found")


def validation_section(settings: ReportSettings) -> Section:
    """Records in / valid / quarantined by reason, PII flags, the GX suite's outcome."""
    summary = read_json(settings.validation)
    if summary is None:
        return missing("validation", settings.validation)
    pii = dict(summary.get("pii") or {})
    checks = {k.removeprefix("pii_"): v for k, v in pii.items() if k.startswith("pii_")}
    bad = summary.get("bad_records") or []
    examples = []
    for item in bad[:5]:
        if isinstance(item, Mapping):
            examples.append(
                {
                    "line": item.get("line"),
                    "reasons": "; ".join(str(r) for r in (item.get("reasons") or [item.get("reason", "")]))[
                        :200
                    ],
                }
            )
        else:
            examples.append({"line": None, "reasons": str(item)[:200]})
    gx = summary.get("gx") or {}
    data = {
        "records": summary.get("records"),
        "valid": summary.get("valid"),
        "quarantined": summary.get("quarantined"),
        "bad_share": summary.get("bad_share"),
        "blank_lines": summary.get("blank_lines"),
        "reasons": dict(sorted((summary.get("reasons") or {}).items(), key=lambda kv: -kv[1])),
        "pii_checks": checks,
        "pii_turns": pii.get("turns", 0),
        "pii_conversations": pii.get("conversations", 0),
        "gx_expectations": gx.get("expectations"),
        "gx_failed": gx.get("failed_expectations"),
        "gx_success": gx.get("success"),
        "examples": examples,
        "source": settings.validation,
    }
    return Section("validation", data)


def pattern_section(
    settings: ReportSettings, fidelity: Mapping[str, Any] | None, assets: Path, report_dir: Path
) -> Section:
    """Per pattern: held-out real users vs each simulator in the same contexts (sim_eval), and the
    labelled training corpus's share (label stage) for scale."""
    path = Path(settings.sim_eval) / "fidelity.json"
    if fidelity is None:
        return missing("patterns", path)
    results = fidelity.get("results") or {}
    with_rates = {n: r["pattern_rates"] for n, r in results.items() if r.get("pattern_rates")}
    if not with_rates:
        return Section(
            "patterns",
            missing=f"{NOT_PRODUCED}: `{path}` has no `pattern_rates` "
            "(written by an older sim_eval; re-run it)",
        )
    from mimesis_rl.data.schema import PATTERN_NAMES

    real = next(iter(with_rates.values()))["real"]
    columns = ["real (held-out)", *with_rates]
    label = read_json(settings.label)
    corpus = (label or {}).get("share") or {}
    rows = []
    for p in PATTERN_NAMES:
        values = {"real (held-out)": real.get(p), **{n: r["simulated"].get(p) for n, r in with_rates.items()}}
        rows.append({"pattern": p, "values": values, "corpus": corpus.get(p)})
    chart = pattern_chart(rows, columns, assets / "patterns.png")
    notes = []
    if label is None:
        notes.append(f"The labelled corpus column is {NOT_PRODUCED} (`{settings.label}` not found).")
    first = next(iter(results.values()))
    data = {
        "columns": columns,
        "rows": rows,
        "corpus": bool(corpus),
        "turns": first.get("turns"),
        "conversations": first.get("conversations"),
        "chart": image(chart, report_dir, "Pattern shares", settings.images == "embed"),
        "no_pattern_share": (label or {}).get("no_pattern_share"),
    }
    return Section("patterns", data, notes=notes)


def fidelity_section(
    settings: ReportSettings, fidelity: Mapping[str, Any] | None, report_dir: Path
) -> Section:
    """The sim_eval tables (intervals in brackets) plus the environment part's overall rows."""
    from mimesis_rl.eval.environment_report import ENV_COLUMNS
    from mimesis_rl.eval.fidelity_report import (
        COLUMNS,
        FORMAT_COLUMNS,
        INTERVALS,
        OPENING_COLUMNS,
        verdict,
    )

    folder = Path(settings.sim_eval)
    if fidelity is None:
        return missing("fidelity", folder / "fidelity.json")
    results = fidelity.get("results") or {}
    embed = settings.images == "embed"

    def table(columns: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
        return {
            "header": [title for _, title, _ in columns],
            "rows": [
                {
                    "name": name,
                    "cells": [
                        with_ci(m.get(key), m.get(INTERVALS.get(key, "")), spec) for key, _, spec in columns
                    ],
                }
                for name, m in results.items()
            ],
        }

    env = fidelity.get("environment") or read_json(folder / "environment.json")
    env_table = None
    if env and env.get("overall"):
        env_table = {
            "header": [title for _, title, _ in ENV_COLUMNS],
            "rows": [
                {"name": name, "cells": [fmt(row.get(k), spec) for k, _, spec in ENV_COLUMNS]}
                for name, row in env["overall"].items()
            ],
            "settings": env.get("settings") or {},
        }
    echoes = [
        {"name": n, "text": cut(e, 160)}
        for n, m in results.items()
        for e in m.get("opening_cue_echo_examples") or []
    ]
    data = {
        "data": fidelity.get("data"),
        "bad_records": fidelity.get("bad_records"),
        "turns": next(iter(results.values()), {}).get("turns"),
        "conversations": next(iter(results.values()), {}).get("conversations"),
        "main": table(COLUMNS),
        "format": table(FORMAT_COLUMNS),
        "opening": table(OPENING_COLUMNS),
        "echoes": echoes,
        "environment": env_table,
        "verdict": [line.removeprefix("- ") for line in verdict(results)],
        "chart": image(folder / "fidelity.png", report_dir, "Fidelity Index components", embed),
        "env_chart": image(folder / "environment.png", report_dir, "Scripted agent vs each simulator", embed),
    }
    notes = (
        []
        if env_table
        else [
            f"The environment rows are {NOT_PRODUCED} (`{folder / 'environment.json'}` not found or empty)."
        ]
    )
    return Section("fidelity", data, notes=notes)


def generalisation_section(
    settings: ReportSettings, result: Mapping[str, Any] | None, report_dir: Path
) -> Section:
    """Per agent, per unseen simulator, the paired comparisons ("better on k of n") and the heatmaps."""
    folder = Path(settings.agent_eval)
    if result is None:
        return missing("generalisation", folder / "generalisation.json")
    agents, members = list(result.get("agents") or []), list(result.get("members") or [])
    per_agent = []
    for a in agents:
        p = result["per_agent"][a]
        b = p.get("behaviour") or {}
        per_agent.append(
            {
                "agent": a,
                "trained_on": (result.get("trained_on") or {}).get(a, ""),
                "success": with_ci(p.get("success_rate"), p.get("success_ci"), "{:.2f}"),
                "reward": with_ci(p.get("mean_reward"), p.get("reward_ci"), "{:.2f}"),
                "turns": fmt(b.get("turns_to_success"), "{:.2f}"),
                "clarifying": fmt(b.get("clarifying_questions"), "{:.2f}"),
                "before_known": fmt(b.get("actions_before_private_known"), "{:.2f}"),
                "acted_before": fmt(b.get("acted_before_private_known_rate"), "{:.2f}"),
            }
        )
    cells = {(r["agent"], r["member"]): r for r in result.get("per_member") or []}
    matrix = [
        {
            "member": m,
            "cells": [
                with_ci(
                    cells.get((a, m), {}).get("success_rate"),
                    cells.get((a, m), {}).get("success_ci"),
                    "{:.2f}",
                )
                for a in agents
            ],
        }
        for m in members
    ]
    comparisons = []
    for name, comp in (result.get("comparisons") or {}).items():
        entry = {
            "name": name,
            "title": comp.get("title") or f"{comp['a']} − {comp['b']}",
            "a": comp["a"],
            "b": comp["b"],
            "metric": comp.get("metric"),
            "measured": comp.get("measured", False),
        }
        if comp.get("measured"):
            o = comp["overall"]
            entry.update(
                {
                    "better": comp["better"],
                    "of": comp["of"],
                    "better_clear": comp["better_clear"],
                    "worse_clear": comp["worse_clear"],
                    "overall": with_ci(o.get("diff"), o.get("ci")),
                    "verdict": o.get("verdict"),
                    "rows": [
                        {
                            "member": r["member"],
                            "diff": with_ci(r.get("diff"), r.get("ci")),
                            "verdict": r.get("verdict"),
                        }
                        for r in comp["per_member"]
                    ],
                }
            )
        else:
            entry["missing"] = ", ".join(comp.get("missing") or [])
        comparisons.append(entry)
    embed = settings.images == "embed"
    heatmaps = []
    for a in agents:
        path = Path((result.get("heatmaps") or {}).get(a) or folder / f"heatmap_{a}.png")
        if not path.is_file():
            path = folder / path.name
        img = image(path, report_dir, a, embed)
        if img is not None:
            heatmaps.append(img)
    s = result.get("settings") or {}
    c = result.get("cost") or {}
    data = {
        "agents": agents,
        "members": members,
        "envs": result.get("envs") or [],
        "per_agent": per_agent,
        "matrix": matrix,
        "comparisons": comparisons,
        "heatmaps": heatmaps,
        "dialogues_per_cell": s.get("dialogues_per_cell"),
        "confidence": s.get("confidence"),
        "bootstrap": s.get("bootstrap"),
        "seeds": result.get("seeds") or [],
        "missing_agents": result.get("missing_agents") or [],
        "skipped_members": result.get("skipped_members") or [],
        "cost": c,
    }
    return Section("generalisation", data)


def claims_section(settings: ReportSettings) -> Section:
    path = Path(settings.agent_eval) / "claims.json"
    table = read_json(path)
    if table is None:
        return missing("claims", path)
    rows = [
        {
            "id": r.get("id"),
            "claim": r.get("claim"),
            "numbers": r.get("numbers"),
            "verdict": r.get("verdict"),
            "css": verdict_class(str(r.get("verdict"))),
        }
        for r in table["rows"]
    ]
    rules = str(table.get("rules", ""))
    items = [" ".join(part.split()) for part in re.split(r"(?m)^\s*- ", rules) if part.strip()]
    return Section("claims", {"rows": rows, "rules": rules, "rule_items": items})


def promotion_section(settings: ReportSettings) -> Section:
    """One line per gated model: promoted or not, the versions, and the gate's reasons."""
    decisions = read_json(settings.promote)
    if decisions is None:
        return missing("promotion", settings.promote)
    lines = []
    for kind, d in decisions.items():
        if isinstance(d, str):
            lines.append({"kind": kind, "line": d, "promoted": None, "reasons": []})
            continue
        verdict = "promoted to champion" if d.get("promoted") else "not promoted"
        champion = d.get("champion_version") or "none"
        lines.append(
            {
                "kind": kind,
                "promoted": bool(d.get("promoted")),
                "reasons": list(d.get("reasons") or []),
                "line": f"{d.get('registered_model')} version {d.get('candidate_version')}: {verdict} "
                f"(champion before: {champion})",
            }
        )
    return Section("promotion", {"lines": lines})
