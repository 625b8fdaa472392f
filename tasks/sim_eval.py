"""Stage `sim_eval`: fidelity of the assistant baseline, SFT-only and SFT+RL simulators against
held-out real users, in one table, and each simulator as the user side of the eight task domains
against the scripted agent (MLflow + `reports/sim_eval/fidelity.{md,png,json}`, `environment.{png,json}`).

    python -m tasks.sim_eval [--profile tiny]
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.eval.environment_settings import EnvironmentSettings
from mimesis_rl.eval.fidelity import FidelitySettings, metric_key, summary_row
from mimesis_rl.eval.fidelity_run import run_eval
from mimesis_rl.settings import from_section
from mimesis_rl.simulator.labeling import load_labeler
from mimesis_rl.training.config import resolve_bf16
from tasks._runner import main

STAGE = "sim_eval"


def simulators(cfg: dict[str, Any]) -> dict[str, str]:
    """name -> spec, from the list in params.yaml (a list, since names like `sft+rl` are not MLflow keys)."""
    out = {}
    for entry in cfg["simulators"]:
        if not isinstance(entry, dict) or set(entry) != {"name", "spec"}:
            raise ValueError(f"sim_eval.simulators: expected {{name, spec}} entries, got {entry!r}")
        out[str(entry["name"])] = str(entry["spec"])
    return out


def inputs(params: dict[str, Any]) -> list[str]:
    cfg = params[STAGE]
    folders = [s for s in simulators(cfg).values() if s != "assistant" and ":/" not in s]
    return [cfg["data"], cfg["base_model"], *folders]


def run(params: dict[str, Any]) -> dict[str, Any]:
    cfg = params[STAGE]
    fidelity = dict(cfg.get("fidelity") or {})
    fidelity.setdefault("seed", int(params.get("seed", 0)))
    settings = from_section(FidelitySettings, fidelity, f"{STAGE}.fidelity")
    environment = from_section(EnvironmentSettings, cfg.get("environment"), f"{STAGE}.environment")
    labeler = load_labeler(cfg.get("labeler", "rules"), params)
    dtype = "bfloat16" if resolve_bf16(params, cfg) else None
    report = run_eval(simulators(cfg), cfg["data"], labeler, settings, cfg["base_model"],
                      cfg["report_dir"], cfg.get("device", "auto"), int(cfg.get("batch_size", 16)), dtype,
                      environment=environment)
    metrics: dict[str, Any] = {"bad_records": report["bad_records"]}
    for name, result in report["results"].items():
        metrics[metric_key(name)] = summary_row(result)
    if report["environment"]:
        metrics["environment"] = {metric_key(name): row for name, row in report["environment"].items()}
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
