"""The MIMESIS report: one static page (HTML, plus the same in Markdown) with the run's evidence.

It reads what the other stages wrote and renders five parts, each saying plainly "not produced by
this run" when its input is missing:

1. data validation (records in / valid / quarantined by reason, PII flags) — `validate`;
2. behaviour patterns, real vs simulated (share of turns per pattern) — `sim_eval` (+ `label`);
3. the fidelity table with intervals, turn format, opening turns, environment rows — `sim_eval`;
4. sample dialogues: the simulator's private reasoning beside each user message, the coach's note
   beside each agent turn (the transcript's own note if it carries one, else the template coach of
   `agent.coach` writes it from hindsight, leak-guarded) — `agent_eval` (or `sim_eval`'s
   environment transcripts);
5. generalisation to unseen simulators (heatmaps, paired differences) and the paper's claims table
   with verdicts — `agent_eval`; and the promotion gate's decision line — `promote`.

Nothing is recomputed here: numbers come from the stages' JSON, so the report and the stages agree.
The page is self-contained (inline CSS, images as base64 PNG by default, no scripts, no CDN), so it
reads offline and survives being mailed around.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

log = logging.getLogger(__name__)

NOT_PRODUCED = "not produced by this run"
SECTIONS = ("validation", "patterns", "fidelity", "dialogues", "generalisation", "claims", "promotion")
TITLES = {
    "validation": "1. Data validation",
    "patterns": "2. Behaviour patterns: real vs simulated",
    "fidelity": "3. Simulator fidelity",
    "dialogues": "4. Sample dialogues",
    "generalisation": "5. Generalisation to unseen simulators",
    "claims": "The paper's claims, measured",
    "promotion": "Promotion gate",
}


@dataclass(frozen=True)
class ReportSettings:
    """The `report` section of params.yaml.

    output: path stem of the report (`.html` and `.md` are written beside each other).
    validation / label / sim_eval / agent_eval / promote: where each stage's outputs are.
    dialogues: sample dialogues shown; coach_horizon: later user turns the template coach reads.
    images: `embed` (base64 PNG in the HTML) or `link` (relative paths; the Markdown always links).
    max_chars: long messages are cut for reading (the transcripts keep them whole).
    """

    output: str = "reports/mimesis_report"
    validation: str = "reports/validation/summary.json"
    label: str = "reports/label/distribution.json"
    sim_eval: str = "reports/sim_eval"
    agent_eval: str = "reports/agent_eval"
    promote: str = "reports/promote/decision.json"
    dialogues: int = 3
    coach_horizon: int = 2
    images: str = "embed"
    max_chars: int = 600
    title: str = "MIMESIS report"

    def __post_init__(self) -> None:
        if self.images not in ("embed", "link"):
            raise ValueError(f"params.yaml report.images: {self.images!r}; use `embed` or `link`")
        if self.dialogues < 0 or self.coach_horizon < 1 or self.max_chars < 40:
            raise ValueError(
                "params.yaml report: dialogues must be >= 0, coach_horizon >= 1, max_chars >= 40"
            )

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> ReportSettings:
        known = set(cls.__dataclass_fields__)
        section = dict(section or {})
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"params.yaml report: unknown key(s) {unknown}; known: {sorted(known)}")
        return cls(**section)

    @property
    def html_path(self) -> Path:
        return Path(f"{self.output}.html")

    @property
    def md_path(self) -> Path:
        return Path(f"{self.output}.md")

    def inputs(self) -> list[str]:
        """Every file or folder the report reads (for lineage tags and the DVC stage)."""
        return [self.validation, self.label, self.sim_eval, self.agent_eval, self.promote]


# -- reading -------------------------------------------------------------------------------------


def read_json(path: str | Path) -> Any | None:
    """A stage's JSON, or None when the file does not exist (the section then says so)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Transcript records; a bad line is an error naming the file and line (never skipped silently)."""
    out = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not valid JSON ({exc})") from None
            if not isinstance(record, dict) or not isinstance(record.get("turns"), list):
                raise ValueError(f"{path}:{number}: not a transcript record (no `turns` list)")
            out.append(record)
    return out


@dataclass
class Image:
    """A PNG for the page: base64 (embedded) and its path relative to the report (linked)."""

    title: str
    relative: str
    data: str | None = None

    @property
    def src(self) -> str:
        return f"data:image/png;base64,{self.data}" if self.data else self.relative


def image(path: str | Path, report_dir: Path, title: str, embed: bool) -> Image | None:
    """None when the PNG was not written (the section shows what it has)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        relative = str(path.resolve().relative_to(report_dir.resolve()))
    except ValueError:
        relative = str(path)
    data = base64.b64encode(path.read_bytes()).decode("ascii") if embed else None
    return Image(title=title, relative=relative, data=data)


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


def _missing(key: str, *paths: str | Path) -> Section:
    return Section(key, missing=f"{NOT_PRODUCED}: {', '.join(f'`{p}`' for p in paths)} not found")


# -- formatting (shared by both templates) -------------------------------------------------------


def fmt(value: Any, spec: str = "{:.3f}") -> str:
    """A number for a table cell; `–` for none / NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return spec.format(int(value)) if spec == "{:d}" else spec.format(float(value))
    return str(value)


def with_ci(value: Any, ci: Sequence[float] | None, spec: str = "{:.3f}") -> str:
    """`value [low, high]` (the interval only when there is one)."""
    text = fmt(value, spec)
    if text != "–" and ci and len(ci) == 2 and not any(c is None or math.isnan(c) for c in ci):
        text += f" [{fmt(ci[0], spec)}, {fmt(ci[1], spec)}]"
    return text


def verdict_class(verdict: str) -> str:
    return {"holds": "holds", "does not hold": "fails", "within noise": "noise"}.get(verdict, "missing")


def cut(text: str | None, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# -- the sections --------------------------------------------------------------------------------


def validation_section(settings: ReportSettings) -> Section:
    """Records in / valid / quarantined by reason, PII flags, the GX suite's outcome."""
    summary = read_json(settings.validation)
    if summary is None:
        return _missing("validation", settings.validation)
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


def pattern_section(
    settings: ReportSettings, fidelity: Mapping[str, Any] | None, assets: Path, report_dir: Path
) -> Section:
    """Per pattern: held-out real users vs each simulator in the same contexts (sim_eval), and the
    labelled training corpus's share (label stage) for scale."""
    path = Path(settings.sim_eval) / "fidelity.json"
    if fidelity is None:
        return _missing("patterns", path)
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
    from mimesis_rl.eval.environment import ENV_COLUMNS
    from mimesis_rl.eval.fidelity_report import (
        COLUMNS,
        FORMAT_COLUMNS,
        INTERVALS,
        OPENING_COLUMNS,
        verdict,
    )

    folder = Path(settings.sim_eval)
    if fidelity is None:
        return _missing("fidelity", folder / "fidelity.json")
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


def coach_notes(record: Mapping[str, Any], horizon: int) -> tuple[list[str], str]:
    """One note per agent turn: the transcript's own (`meta.coach_note`) when every agent turn has one,
    else the template coach's from hindsight, with private slot values redacted. Returns (notes, source)."""
    agent_turns = [t for t in record["turns"] if t.get("role") == "assistant"]
    own = [(t.get("meta") or {}).get("coach_note") for t in agent_turns]
    if agent_turns and all(own):
        return [str(n) for n in own], "transcript"
    from mimesis_rl.agent.coach import TemplateCoach, contexts_from_record, redact

    contexts = contexts_from_record(record, horizon)
    notes = TemplateCoach().notes(contexts)
    return [redact(n, c.goal, c.slot_labels) for n, c in zip(notes, contexts, strict=True)], "template coach"


def _dialogue(record: Mapping[str, Any], settings: ReportSettings, origin: str) -> dict[str, Any]:
    notes, source = coach_notes(record, settings.coach_horizon)
    turns, k = [], 0
    for t in record["turns"]:
        role = t.get("role")
        entry = {
            "role": role,
            "text": cut(t.get("content"), settings.max_chars),
            "side": None,
            "patterns": [],
            "action": None,
        }
        if role == "user":
            entry["side"] = cut(t.get("reasoning"), settings.max_chars) or None
            entry["patterns"] = list(t.get("patterns") or [])
        elif role == "assistant":
            entry["side"] = notes[k] if k < len(notes) else None
            action = (t.get("meta") or {}).get("action")
            entry["action"] = json.dumps(action, ensure_ascii=False) if action else None
            k += 1
        turns.append(entry)
    goal = record.get("goal") or {}
    private = [s for s in goal.get("private") or [] if s in (goal.get("slots") or {})]
    return {
        "episode": record.get("episode_id"),
        "agent": record.get("agent"),
        "user": record.get("member") or record.get("user"),
        "domain": record.get("domain"),
        "seed": record.get("seed"),
        "success": record.get("success"),
        "reward": record.get("reward"),
        "end_reason": record.get("end_reason"),
        "goal": cut(goal.get("text"), 300),
        "private": private,
        "turns": turns,
        "coach": source,
        "origin": origin,
        "reasoning_turns": sum(1 for t in turns if t["role"] == "user" and t["side"]),
    }


def _user(record: Mapping[str, Any]) -> Any:
    return record.get("member") or record.get("user")


def pick_dialogues(records: Sequence[Mapping[str, Any]], n: int) -> list[Mapping[str, Any]]:
    """A readable, varied sample: dialogues whose user turns carry reasoning first, then round-robin
    over agents and users, alternating successes and failures, never the same domain twice in a row."""
    if n <= 0 or not records:
        return []

    def has_reasoning(r: Mapping[str, Any]) -> bool:
        return any(t.get("role") == "user" and (t.get("reasoning") or "").strip() for t in r["turns"])

    pool = sorted(
        records,
        key=lambda r: (
            not has_reasoning(r),
            str(r.get("agent")),
            str(r.get("member")),
            str(r.get("domain")),
            r.get("seed") or 0,
        ),
    )
    chosen: list[Mapping[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    want_success = True
    for _ in range(n):

        def rank(r: Mapping[str, Any], want: bool = want_success) -> tuple[Any, ...]:
            agents = sum(1 for c in chosen if c.get("agent") == r.get("agent"))
            users = sum(1 for c in chosen if _user(c) == _user(r))
            domains = sum(1 for c in chosen if c.get("domain") == r.get("domain"))
            return (not has_reasoning(r), agents + users + domains, bool(r.get("success")) != want)

        left = [
            r
            for r in pool
            if id(r) not in {id(c) for c in chosen}
            and (r.get("agent"), r.get("episode_id"), r.get("member")) not in seen
        ]
        if not left:
            break
        best = min(left, key=rank)
        chosen.append(best)
        seen.add((best.get("agent"), best.get("episode_id"), best.get("member")))
        want_success = not want_success
    return chosen


def dialogue_section(settings: ReportSettings) -> Section:
    """Sample dialogues from agent_eval's transcripts (trained agents vs unseen simulators), else from
    sim_eval's environment transcripts (the scripted agent vs each simulator)."""
    folder = Path(settings.agent_eval) / "transcripts"
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    origin = "agent_eval: trained agents against unseen simulators"
    if not files:
        env_file = Path(settings.sim_eval) / "environment_transcripts.jsonl"
        files = [env_file] if env_file.is_file() else []
        origin = "sim_eval: the scripted agent against each simulator (agent_eval transcripts not found)"
    if not files:
        return _missing("dialogues", folder, Path(settings.sim_eval) / "environment_transcripts.jsonl")
    records = [r for f in files for r in read_jsonl(f)]
    picked = pick_dialogues(records, settings.dialogues)
    dialogues = [_dialogue(r, settings, origin) for r in picked]
    notes = []
    if dialogues and not any(d["reasoning_turns"] for d in dialogues):
        notes.append(
            "No user turn of these transcripts carries private reasoning (scripted or prompted users "
            "only, or the simulators wrote none)."
        )
    return Section(
        "dialogues",
        {"origin": origin, "dialogues": dialogues, "files": [str(f) for f in files], "total": len(records)},
        notes=notes,
    )


def generalisation_section(
    settings: ReportSettings, result: Mapping[str, Any] | None, report_dir: Path
) -> Section:
    """Per agent, per unseen simulator, the paired comparisons ("better on k of n") and the heatmaps."""
    folder = Path(settings.agent_eval)
    if result is None:
        return _missing("generalisation", folder / "generalisation.json")
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
        return _missing("claims", path)
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
        return _missing("promotion", settings.promote)
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


# -- assembling ----------------------------------------------------------------------------------


def build(settings: ReportSettings, run_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every section's data (the context both templates render)."""
    report_dir = settings.html_path.parent
    assets = report_dir / f"{settings.html_path.stem}_files"
    # Always there (a DVC output), even when no chart is drawn: a note says what it is for.
    assets.mkdir(parents=True, exist_ok=True)
    (assets / "README.txt").write_text(
        f"Images {settings.md_path.name} links to ({settings.html_path.name} embeds them or links here).\n"
    )
    fidelity = read_json(Path(settings.sim_eval) / "fidelity.json")
    generalisation = read_json(Path(settings.agent_eval) / "generalisation.json")
    sections = {
        "validation": validation_section(settings),
        "patterns": pattern_section(settings, fidelity, assets, report_dir),
        "fidelity": fidelity_section(settings, fidelity, report_dir),
        "dialogues": dialogue_section(settings),
        "generalisation": generalisation_section(settings, generalisation, report_dir),
        "claims": claims_section(settings),
        "promotion": promotion_section(settings),
    }
    return {
        "title": settings.title,
        "run": dict(run_info or {}),
        "sections": sections,
        "order": list(SECTIONS),
        "not_produced": NOT_PRODUCED,
    }


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("mimesis_rl.eval", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html", "html.jinja"), default_for_string=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = fmt
    env.filters["codeticks"] = lambda text: Markup(
        re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text)))
    )
    env.filters["mdcell"] = lambda v: str(v if v is not None else "–").replace("|", "\\|").replace("\n", " ")
    env.globals["verdict_class"] = verdict_class
    return env


def render_html(context: Mapping[str, Any]) -> str:
    return _environment().get_template("report.html.jinja").render(**context)


def render_markdown(context: Mapping[str, Any]) -> str:
    return _environment().get_template("report.md.jinja").render(**context)


def write(settings: ReportSettings, run_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Render both files atomically; returns the paths and a summary for metrics/report.json."""
    from mimesis_rl.fsutil import write_text

    context = build(settings, run_info)
    md_context = dict(context)
    write_text(settings.html_path, render_html(context))
    # The Markdown links images (relative) instead of embedding them.
    write_text(settings.md_path, render_markdown(md_context))
    sections: dict[str, Section] = context["sections"]
    claims = sections["claims"].data.get("rows", []) if sections["claims"].produced else []
    return {
        "html": str(settings.html_path),
        "md": str(settings.md_path),
        "html_bytes": settings.html_path.stat().st_size,
        "sections_produced": sum(s.produced for s in sections.values()),
        "sections_missing": [k for k, s in sections.items() if not s.produced],
        "sections": {k: int(s.produced) for k, s in sections.items()},
        "dialogues": len(sections["dialogues"].data.get("dialogues", [])),
        "claims": {f"claim{r['id']}": r["verdict"] for r in claims},
        "context": context,
    }
