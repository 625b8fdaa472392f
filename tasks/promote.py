"""Stage `promote`: the promotion gate for the simulator and the agent.

Reads this run's evidence (`sim_eval`'s fidelity.json for the simulator, `agent_eval`'s
generalisation.json for the agent), compares each `candidate` registry version with the current
`champion` by the rules in params.yaml `promote`, moves `champion` only when they hold (read back to
confirm), and records the decision on the version and in `reports/promote/decision.{json,md}`.

    python -m tasks.promote [--profile tiny]
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from mimesis_rl.fsutil import write_json, write_text
from mimesis_rl.tracking.promotion import Decision, GateSettings, Metric, PromoteSettings, promote
from tasks._runner import main

STAGE = "promote"
log = logging.getLogger("mimesis")


def simulator_metrics(report: dict[str, Any], row: str) -> dict[str, Metric]:
    """The candidate simulator's row of the fidelity report (its name in `sim_eval.simulators`)."""
    results = report.get("results", {})
    if row not in results:
        raise ValueError(f"fidelity report has no simulator {row!r}; it has {sorted(results)}")
    r = results[row]
    out = {"fidelity_index": Metric.of(r["fidelity_index"])}
    for key in ("turing_distance", "behaviour_fidelity"):
        if r.get(key) is not None:
            out[key] = Metric.of(r[key], r.get(f"{key}_ci"))
    return out


def agent_metrics(report: dict[str, Any], name: str) -> dict[str, Metric]:
    """The candidate agent's success over every unseen simulator of the generalisation matrix."""
    agents = report.get("per_agent", {})
    if name not in agents:
        raise ValueError(f"generalisation report has no agent {name!r}; it has {sorted(agents)}")
    a = agents[name]
    return {"unseen_success": Metric.of(a["success_rate"], a.get("success_ci")),
            "unseen_reward": Metric.of(a["mean_reward"], a.get("reward_ci"))}


def gate(kind: str, settings: GateSettings, reader: Any) -> Decision | str:
    """One registered model through the gate; a string says why it was not evaluated."""
    report_path = Path(settings.report)
    if not report_path.exists():
        return f"{report_path} not found (its stage is not in this pipeline): {kind} not evaluated"
    metrics = reader(json.loads(report_path.read_text()), settings.row)
    return promote(settings.registered_model, metrics, settings.rules,
                   candidate_alias=settings.candidate_alias, champion_alias=settings.champion_alias,
                   dry_run=bool(settings.dry_run))


def markdown(decisions: dict[str, Decision | str]) -> str:
    lines = ["# Promotion gate", ""]
    for kind, d in decisions.items():
        if isinstance(d, str):
            lines += [f"## {kind}", "", d, ""]
            continue
        verdict = "**promoted**" if d.promoted else "**not promoted**"
        lines += [f"## {kind}: {d.registered_model} version {d.candidate_version} — {verdict}", "",
                  f"Compared with champion version {d.champion_version or '(none)'}.", ""]
        lines += [f"- {reason}" for reason in d.reasons] + [""]
    return "\n".join(lines)


def inputs(params: dict[str, Any]) -> list[str]:
    return [g.report for g in PromoteSettings.from_section(params[STAGE]).gates().values()]


def run(params: dict[str, Any]) -> dict[str, Any]:
    settings = PromoteSettings.from_section(params[STAGE])
    readers = {"simulator": simulator_metrics, "agent": agent_metrics}
    decisions = {kind: gate(kind, g, readers[kind]) for kind, g in settings.gates().items()}
    report = Path(settings.report_dir)
    write_json(report / "decision.json",
               {k: d if isinstance(d, str) else d.as_dict() for k, d in decisions.items()})
    write_text(report / "decision.md", markdown(decisions))
    try:
        import mlflow

        mlflow.log_artifacts(str(report), artifact_path="promote")
    except Exception as exc:  # noqa: BLE001 - the decision is already made and recorded on the versions
        log.warning("could not log the decision files to MLflow: %s", exc)
    metrics: dict[str, Any] = {}
    for kind, d in decisions.items():
        if isinstance(d, str):
            metrics[kind] = {"evaluated": 0}
            continue
        metrics[kind] = {"evaluated": 1, "promoted": int(d.promoted),
                         "candidate_version": int(d.candidate_version),
                         **{name: m["value"] for name, m in d.candidate.items()}}
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
