"""Stage `sim_eval`: fidelity of the assistant baseline, SFT-only and SFT+RL simulators against
held-out real users, in one table, and each simulator as the user side of the eight task domains
against the scripted agent (MLflow + `reports/sim_eval/fidelity.{md,png,json}`, `environment.{png,json}`).

    python -m tasks.sim_eval [--profile tiny]
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.eval.fidelity import metric_key, summary_row
from mimesis_rl.eval.fidelity_run import run_eval
from mimesis_rl.eval.sim_eval_settings import SimEvalSettings
from mimesis_rl.simulator.labeling import load_labeler
from mimesis_rl.training.config import resolve_bf16
from tasks._runner import main

STAGE = "sim_eval"


def inputs(params: dict[str, Any]) -> list[str]:
    settings = SimEvalSettings.from_params(params)
    folders = [s for s in settings.simulators.values() if s != "assistant" and ":/" not in s]
    return [settings.data, settings.base_model, *folders]


def run(params: dict[str, Any]) -> dict[str, Any]:
    settings = SimEvalSettings.from_params(params)
    labeler = load_labeler(settings.labeler, params)
    dtype = "bfloat16" if resolve_bf16(params, {"device": settings.device, "bf16": settings.bf16}) else None
    report = run_eval(settings.simulators, settings.data, labeler, settings.fidelity, settings.base_model,
                      settings.report_dir, settings.device, settings.batch_size, dtype,
                      environment=settings.environment, decision_items=settings.decision_items)
    metrics: dict[str, Any] = {"bad_records": report["bad_records"]}
    for name, result in report["results"].items():
        metrics[metric_key(name)] = summary_row(result)
    if report["environment"]:
        metrics["environment"] = {metric_key(name): row for name, row in report["environment"].items()}
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
