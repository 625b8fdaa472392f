"""`reports/evidence/claims.md`: the evidence point's claims, done-when checks and curves, written from
`eval.evidence.collect`'s dict (the same numbers `evidence.json` holds). Renders, never computes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mimesis_rl.eval.claims import MISSING


def _cell(value: Any) -> str:
    return str(value if value is not None else "–").replace("|", "\\|").replace("\n", " ")


def _num(value: Any, spec: str = "{:.3f}") -> str:
    return "–" if value is None else spec.format(value)


def _size(n: Mapping[str, Any] | None) -> str:
    if not n:
        return "–"
    return ", ".join(f"{v} {k}" for k, v in n.items() if v is not None) or "–"


def decision_line(row: Mapping[str, Any]) -> str | None:
    """Beside claim 1: each simulator's decision-agreement rate (not part of the verdict)."""
    parts = []
    for name, d in (row.get("decisions") or {}).items():
        if d:
            answered = f", answers {_num(d.get('answer_rate'))} of {d.get('questions')} questions" \
                if d.get("answer_rate") is not None else ""
            parts.append(f"`{name}` {_num(d['decision_accuracy'])} of {d.get('decisions')} "
                         f"decisions{answered}")
        else:
            parts.append(f"`{name}` {MISSING}")
    return "Decision accuracy beside claim 1 (agreement with the card on pending offers): " + \
        "; ".join(parts) if parts else None


def curve_table(stage: str, points: Sequence[Mapping[str, float]]) -> list[str]:
    keys = sorted({k for p in points for k in p if k not in ("step", "seconds")})
    lines = [f"**{stage}**", "", "| step | " + " | ".join(keys) + " |", "|---:|" + "---:|" * len(keys)]
    for p in points:
        lines.append(f"| {int(p['step'])} | " + " | ".join(_num(p.get(k)) for k in keys) + " |")
    return [*lines, ""]


def markdown(evidence: Mapping[str, Any]) -> str:
    """The page: a header line, the claims, the checks, the per-domain environment table, the curves."""
    head = " · ".join(x for x in (
        f"profile **{evidence['profile']}**" if evidence.get("profile") else "",
        f"commit `{str(evidence['git_commit'])[:10]}`" if evidence.get("git_commit") else "",
        f"written {evidence['generated']}" if evidence.get("generated") else "") if x)
    lines = ["# The paper's claims at the evidence point", "", head, "",
             "Every number comes from the stages' files; verdicts follow from the intervals only (rules "
             "below) and stand whatever they say. `does not hold` means the claim fails: its interval "
             "lies wholly on the wrong side.", "",
             "## Claims", "", "| # | Claim | Measured (this run) | n | Verdict |", "|---|---|---|---|---|"]
    for r in evidence["claims"]:
        lines.append(f"| {r['id']} | {_cell(r['claim'])} | {_cell(r['numbers'])} "
                     f"| {_cell(_size(r.get('n')))} | **{r['verdict']}** |")
    lines.append("")
    for r in evidence["claims"]:
        if r["id"] == 1 and (line := decision_line(r)):
            lines += [line, ""]
    lines += ["## Done when (issue 27)", "", "| Check | Measured | Result |", "|---|---|---|"]
    for c in evidence["checks"]:
        lines.append(f"| {_cell(c['check'])} | {_cell(c['measured'])} | **{c['status']}** |")
    lines.append("")
    env = next((c for c in evidence["checks"] if c["id"] == "environment"), None)
    if env and env["numbers"].get("domains"):
        lines += ["Scripted agent's success per domain: against the cooperative scripted user and against "
                  "the candidate simulator.", "",
                  "| Domain | vs cooperative | vs candidate | ratio | meets |", "|---|---:|---:|---:|---|"]
        for d in env["numbers"]["domains"]:
            cells = [_num(d[k], "{:.2f}") for k in ("reference", "candidate", "ratio")]
            lines.append(f"| {d['domain']} | " + " | ".join(cells) + f" | {'yes' if d['meets'] else 'no'} |")
        lines.append("")
    lines += ["## Learning curves", ""]
    charts = evidence.get("charts") or {}
    curves = evidence.get("curves") or {}
    stages = {**(curves.get("simulator") or {}), **(curves.get("agents") or {})}
    if not stages:
        lines += [f"_{MISSING}: no metrics file holds a `curve`._", ""]
    for name, file in charts.items():
        lines += [f"![{name}]({file})", ""]
    for stage, points in stages.items():
        lines += curve_table(stage, points)
    lines += ["## How verdicts are decided", "", str(evidence.get("rules", "")), "", "## Inputs", ""]
    for path, found in (evidence.get("inputs") or {}).items():
        lines.append(f"- `{path}`: {'read' if found else 'not found'}")
    return "\n".join(lines) + "\n"
