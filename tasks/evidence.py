"""Stage `evidence`: the paper's claims at this run's scale, the issue's done-when checks and the
learning curves, in `reports/evidence/` (claims.md, evidence.json, simulator_curves.png, agent_curves.png).

    python -m tasks.evidence [--profile evidence]

Trains and plays nothing: it reads what `sim_eval` and `agent_eval` wrote and the `curve` points the
training stages kept in their metrics files (`eval.evidence`), so it costs seconds and can be re-run
on any finished run. A missing input makes its claim or check say `not measured`. The files go to the
stage's MLflow run and to the pipeline's parent run. `python -m benchmarks.evidence` adds the machine
and each stage's time to the same numbers (benchmarks/results/evidence.json).
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

from mimesis_rl.eval.evidence import collect, curve_files
from mimesis_rl.eval.evidence_report import markdown
from mimesis_rl.eval.evidence_settings import EvidenceSettings
from mimesis_rl.fsutil import write_json, write_text
from mimesis_rl.report.curves import draw
from tasks._runner import main
from tasks.report import log_files, run_info

STAGE = "evidence"
log = logging.getLogger("mimesis")


def inputs(params: dict[str, Any]) -> list[str]:
    settings = EvidenceSettings.from_section(params.get(STAGE))
    return [*settings.inputs(), *curve_files(settings.metrics)]


def build(settings: EvidenceSettings, info: dict[str, Any]) -> tuple[dict[str, Any], list[Path]]:
    """Collect, draw, write; returns the evidence dict and the files written."""
    out = Path(settings.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    evidence = collect(settings)
    for old in out.glob("*.png"):  # a chart from an earlier run must not pass for this run's
        old.unlink()
    pngs = draw(evidence["curves"], out)
    evidence["charts"] = {group: path.name for group, path in pngs.items()}
    evidence.update({k: info.get(k) for k in ("profile", "git_commit", "generated", "parent_run_id")})
    write_json(out / "evidence.json", evidence)
    write_text(out / "claims.md", markdown(evidence))
    return evidence, [out / "claims.md", out / "evidence.json", *pngs.values()]


def run(params: dict[str, Any]) -> dict[str, Any]:
    settings = EvidenceSettings.from_section(params.get(STAGE))
    info = run_info(params)
    info.setdefault("generated", dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"))
    evidence, files = build(settings, info)
    logged = log_files(files, info.get("parent_run_id"), artifact_path=STAGE)
    for c in evidence["checks"]:
        log.info("evidence | %s: %s (%s)", c["id"], c["status"], c["measured"])
    for r in evidence["claims"]:
        log.info("evidence | claim %s: %s (%s)", r["id"], r["verdict"], r["numbers"])
    checks = {c["id"]: c["status"] for c in evidence["checks"]}
    curves = {**evidence["curves"]["simulator"], **evidence["curves"]["agents"]}
    return {
        "claims": {f"claim{r['id']}": r["verdict"] for r in evidence["claims"]},
        "checks": checks,
        "checks_passed": sum(v == "pass" for v in checks.values()),
        "checks_failed": sum(v == "fail" for v in checks.values()),
        "checks_not_measured": sum(v not in ("pass", "fail") for v in checks.values()),
        "curve_stages": len(curves),
        "curve_points": sum(len(p) for p in curves.values()),
        "charts": len(evidence["charts"]),
        "logged_to_parent": int(bool(info.get("parent_run_id")) and len(logged) > 0),
    }


if __name__ == "__main__":
    main(STAGE, run, inputs)
