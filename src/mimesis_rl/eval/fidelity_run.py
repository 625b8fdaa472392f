"""One fidelity comparison end to end, shared by the `sim_eval` stage and `mimesis sim eval`:
load the simulators (folders, MLflow URIs, `assistant`), read any schema-valid JSONL, simulate and
label the selected turns and score them (`eval.fidelity`), optionally play the scripted agent
against the same simulator objects in every domain (the environment part,
`mimesis_rl.eval.environment_run`), write the markdown + PNG + JSON report, and log it all to the
active MLflow run."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mimesis_rl.data.schema import Conversation
from mimesis_rl.eval.coach_notes import with_coach_notes
from mimesis_rl.eval.environment_metrics import EnvironmentRun, env_summary
from mimesis_rl.eval.environment_report import BAR, env_markdown, headline, heatmap, shortfalls
from mimesis_rl.eval.environment_run import run_environment
from mimesis_rl.eval.environment_settings import EnvironmentSettings
from mimesis_rl.eval.fidelity import (
    TurnRecord,
    examples,
    format_shares,
    metric_key,
    records_for,
    score,
    select,
    summary_row,
)
from mimesis_rl.eval.fidelity_report import render
from mimesis_rl.eval.fidelity_settings import FidelitySettings
from mimesis_rl.fsutil import write_json
from mimesis_rl.simulator.turn_stats import ParseStats

log = logging.getLogger(__name__)


def load_simulators(specs: Mapping[str, str], base_model: str | Path, device: str = "auto",
                    batch_size: int = 16, dtype: str | None = None) -> dict[str, Any]:
    """name -> UserSimulator for `assistant`, a simulator folder or an MLflow URI."""
    from mimesis_rl.simulator.runtime import UserSimulator

    return {name: UserSimulator.load(spec, name=name, base_model=base_model, device=device,
                                     batch_size=batch_size, dtype=dtype) for name, spec in specs.items()}


def read_heldout(path: str | Path) -> tuple[list[Conversation], list[str]]:
    """Schema-valid conversations of any JSONL, plus a note per bad line (reported, never silent)."""
    from mimesis_rl.data.jsonl import BadRecord, DataError, iter_conversations

    good, bad = [], []
    for _, item in iter_conversations(path):
        if isinstance(item, BadRecord):
            bad.append(str(item))
        else:
            good.append(item)
    if bad:
        log.warning("%s: %d bad record(s) skipped, first: %s", path, len(bad), bad[0])
    if not good:
        raise DataError(f"{path}: no schema-valid conversation to evaluate on"
                        + (f" (first problem: {bad[0]})" if bad else ""))
    return good, bad


def simulate(simulator: Any, records: list[TurnRecord], seed: int = 0) -> None:
    """Fill `simulated` for every record (one batched pass)."""
    parsed = simulator.reply([r.prompt for r in records], seed=seed)
    for record, turn in zip(records, parsed, strict=True):
        record.simulated = turn


def label(records: list[TurnRecord], labeler: Any, conversations: Sequence[Conversation],
          real_from: str = "labeler") -> None:
    """Label real and simulated turns in the same (real) context with the same labeler."""
    from mimesis_rl.behavior.context import TurnInContext

    by_id = {c.conversation_id: c for c in conversations}

    def context(record: TurnRecord, text: str) -> TurnInContext:
        conv = by_id[record.conversation_id]
        return TurnInContext(text=text, history=tuple(conv.turns[: record.turn_index]), goal=conv.goal,
                             domain=conv.domain, where=f"{conv.conversation_id} turn {record.turn_index}")

    sim_todo = [r for r in records if r.sim_message.strip()]
    sim_labels = labeler.label_contexts([context(r, r.sim_message) for r in sim_todo])
    for record, (names, _) in zip(sim_todo, sim_labels, strict=True):
        record.sim_patterns = tuple(names)
    if real_from == "data":
        for record in records:
            record.real_patterns = record.data_patterns
        return
    real_labels = labeler.label_contexts([context(r, r.real_message) for r in records])
    for record, (names, _) in zip(records, real_labels, strict=True):
        record.real_patterns = tuple(names)


def evaluate(simulator: Any, conversations: Sequence[Conversation], labeler: Any,
             settings: FidelitySettings) -> dict[str, Any]:
    """Simulate, label and score one simulator on held-out conversations."""
    if settings.max_context_tokens:
        simulator.max_context_tokens = min(simulator.max_context_tokens, settings.max_context_tokens)
    selection = select(conversations, settings)
    records = records_for(selection, simulator.max_behaviours)
    log.info("%s: simulating %d user turns of %d conversations", simulator.name, len(records), len(selection))
    simulator.stats = ParseStats()  # this evaluation's counts only
    simulate(simulator, records, settings.seed)
    label(records, labeler, [conv for conv, _ in selection], settings.real_patterns)
    metrics = score(records, settings, simulator)
    metrics["parse"] = simulator.stats.as_metrics()
    metrics.update(format_shares(simulator.stats))
    metrics["examples"] = examples(records, seed=settings.seed)
    return metrics


def compare(simulators: Mapping[str, Any], conversations: Sequence[Conversation], labeler: Any,
            settings: FidelitySettings) -> dict[str, dict[str, Any]]:
    """Evaluate several loaded simulators on the same held-out turns; one result per name."""
    results = {}
    for name, simulator in simulators.items():
        results[name] = evaluate(simulator, conversations, labeler, settings)
        log.info("%s: Fidelity Index %.1f, TD %s, behaviour fidelity %.3f", name,
                 results[name]["fidelity_index"], results[name]["turing_distance"],
                 results[name]["behaviour_fidelity"])
    return results


def log_to_mlflow(results: Mapping[str, Mapping[str, Any]], files: list[Path]) -> None:
    """Metrics per simulator (`<name>.<metric>`), the comparison table and the report files."""
    import mlflow

    if mlflow.active_run() is None:
        return
    rows = {metric_key(name): summary_row(m) for name, m in results.items()}
    mlflow.log_metrics({f"{name}.{k}": v for name, row in rows.items() for k, v in row.items()})
    table = {"simulator": list(results)}
    for key in sorted({k for row in rows.values() for k in row}):
        table[key] = [rows[metric_key(name)].get(key) for name in results]
    mlflow.log_table(table, artifact_file="sim_eval/fidelity_table.json")
    for path in files:
        mlflow.log_artifact(str(path), artifact_path="sim_eval")


def log_environment(run: EnvironmentRun, files: list[Path]) -> None:
    """The environment part: `env.<name>.<metric>` and `env.<name>.<domain>.<metric>`, a table, files."""
    import mlflow

    if mlflow.active_run() is None:
        return
    summary = env_summary(run)
    mlflow.log_metrics({f"env.{metric_key(name)}.{k}": v
                        for name, row in summary.items() for k, v in row.items()})
    table: dict[str, list[Any]] = {"user_side": [], "domain": []}
    keys = sorted({k for rows in run.rows.values() for row in rows.values() for k, v in row.items()
                   if isinstance(v, int | float) and not isinstance(v, bool)})
    for name, rows in run.rows.items():
        for domain, row in rows.items():
            table["user_side"].append(name)
            table["domain"].append(domain)
            for key in keys:
                table.setdefault(key, []).append(row.get(key))
    mlflow.log_table(table, artifact_file="sim_eval/environment_table.json")
    for path in files:
        mlflow.log_artifact(str(path), artifact_path="sim_eval")


def environment_part(simulators: Mapping[str, Any], settings: EnvironmentSettings,
                     report_dir: Path) -> tuple[EnvironmentRun, list[str], list[Path]]:
    """Play it, write `environment.{png,json}` (+ transcripts with coach notes) and return the report
    section."""
    from mimesis_rl.data.jsonl import write_jsonl

    run = run_environment(simulators, settings)
    for line in headline(run):
        log.info("environment | %s", line)
    for name, short in shortfalls(run).items():  # a measurement: reported loudly, never fatal
        if short:
            log.warning("environment | %s falls short of the bar (%s): %s", name, BAR, "; ".join(short))
    png = heatmap(run, report_dir / "environment.png")
    files = [png, report_dir / "environment.json"]
    write_json(files[1], run.as_dict())
    if settings.transcripts:
        files.append(report_dir / "environment_transcripts.jsonl")
        write_jsonl(files[-1], with_coach_notes(run.transcripts, settings.coach_horizon))
    return run, env_markdown(run, png.name), files


def run_eval(specs: Mapping[str, str], data: str | Path, labeler: Any, settings: FidelitySettings,
             base_model: str | Path, report_dir: str | Path, device: str = "auto",
             batch_size: int = 16, dtype: str | None = None,
             environment: EnvironmentSettings | None = None, decision_items: int = 0) -> dict[str, Any]:
    """Evaluate every simulator in `specs` on `data`, and (with `environment`) as the user side of
    the task domains; returns {name: metrics}, the environment summary and report paths. With
    `decision_items`, each result holds `decisions`: its agreement with the card on held-out items."""
    conversations, bad = read_heldout(data)
    simulators = load_simulators(specs, base_model, device, batch_size, dtype)
    results = compare(simulators, conversations, labeler, settings)
    if decision_items:
        from mimesis_rl.eval.decisions import decision_accuracy
        from mimesis_rl.simulator.curve import held_out_items

        items = held_out_items(decision_items)
        for name, simulator in simulators.items():
            results[name]["decisions"] = decision_accuracy(simulator, items)
            log.info("decisions | %s: %s", name, {k: results[name]["decisions"][k]
                                                   for k in ("decision_accuracy", "answer_rate")})
    report_dir = Path(report_dir)
    env_run, env_lines, env_files = None, None, []
    if environment is not None and environment.enabled:
        env_run, env_lines, env_files = environment_part(simulators, environment, report_dir)
    md, png = render(results, report_dir, data=str(data), weights=settings.weights, environment=env_lines)
    write_json(report_dir / "fidelity.json", {"data": str(data), "bad_records": len(bad), "results": results,
                                              "environment": env_run.as_dict() if env_run else None})
    log_to_mlflow(results, [md, png, report_dir / "fidelity.json"])
    if env_run is not None:
        log_environment(env_run, env_files)
    return {"results": results, "bad_records": len(bad), "report": str(md), "chart": str(png),
            "environment": env_summary(env_run) if env_run else None}
