"""`mimesis sim …`: evaluate a user simulator's fidelity against real users, chat with one."""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="User simulators: fidelity evaluation and a quick chat.", no_args_is_help=True)


@app.command("eval")
def eval_command(
    model: Annotated[str, typer.Option(help="simulator folder or URI (models:/mimesis-simulator@candidate), "
                                            "or a served one: openai:http://HOST:PORT/v1#MODEL")],
    data: Annotated[Path, typer.Option(help="any schema-valid conversations JSONL (held-out real users)")],
    baseline: Annotated[list[str], typer.Option(help="also evaluate: assistant | folder | URI (repeatable)")]
    = [],  # noqa: B006 - typer reads the default
    name: Annotated[str, typer.Option(help="the model's name in the report")] = "model",
    base_model: Annotated[Path, typer.Option(help="base model for `assistant` and unbundled adapters")]
    = Path("models/base"),
    labeler: Annotated[str, typer.Option(help="behaviour labeler backend")] = "rules",
    max_turns: Annotated[int, typer.Option(help="held-out user turns to simulate (0 = all)")] = 200,
    turns_per_conversation: Annotated[int, typer.Option(help="user turns per conversation (0 = all)")] = 4,
    embedding: Annotated[str, typer.Option(help="minilm | hashing")] = "minilm",
    out: Annotated[Path, typer.Option(help="report folder")] = Path("reports/sim_eval_cli"),
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    seed: Annotated[int, typer.Option()] = 0,
    max_bad_share: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="exit 1 (before loading a model) past this share of bad records")] = 0.05,
) -> None:
    """Simulate every real user turn of DATA in context and print the fidelity report as JSON."""
    from mimesis_rl.cli._checks import check_eval_data

    check_eval_data(data, out, max_bad_share)
    from mimesis_rl.config import load_params
    from mimesis_rl.data.jsonl import DataError
    from mimesis_rl.eval.fidelity import summary_row
    from mimesis_rl.eval.fidelity_run import run_eval
    from mimesis_rl.eval.fidelity_settings import FidelitySettings
    from mimesis_rl.simulator.labeling import load_labeler
    from mimesis_rl.tracking import stage_run

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        project = load_params()
    except FileNotFoundError:  # outside a checkout: the built-in defaults
        project = {}
    except ValueError as exc:  # a malformed params.yaml (ParamsError) is said, never ignored
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    weights = project.get("sim_eval", {}).get("fidelity", {}).get("weights")
    settings = FidelitySettings(max_turns=max_turns or None,
                                turns_per_conversation=turns_per_conversation or None,
                                embedding=embedding, seed=seed,
                                **({"weights": weights} if weights else {}))
    specs = {b: b for b in baseline}
    specs[name] = model
    params = {"model": model, "data": str(data), "baselines": ",".join(baseline), "labeler": labeler,
              "max_turns": max_turns}
    from mimesis_rl.tracking.runs import has_store

    # Outside a checkout, with no MLFLOW_TRACKING_URI, there is no store to record into: creating an
    # mlflow.db in whatever folder the user stands in would litter it, so the run is not tracked.
    tracked = has_store()
    if not tracked:
        typer.secho("note: not tracked in MLflow (no MIMESIS checkout here and MLFLOW_TRACKING_URI unset)",
                    fg="yellow", err=True)
    try:
        with stage_run("sim_eval_cli", params, inputs=[data]) if tracked else contextlib.nullcontext():
            report = run_eval(specs, data, load_labeler(labeler, project or None), settings, base_model, out,
                              device)
    except (DataError, FileNotFoundError, ValueError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from exc
    summary = {n: summary_row(m) for n, m in report["results"].items()}
    typer.echo(json.dumps({"data": str(data), "bad_records": report["bad_records"],
                           "report": report["report"], "simulators": summary}, indent=2))


@app.command("chat")
def chat_command(
    model: Annotated[str, typer.Option(help="simulator folder, MLflow URI, or `assistant`")],
    domain: Annotated[str, typer.Option()] = "shopping",
    goal: Annotated[str, typer.Option(help="what the user wants, in words")] = "Buy a rain jacket.",
    message: Annotated[list[str], typer.Option(help="agent messages, in order (repeatable)")] = [],  # noqa: B006
    base_model: Annotated[Path, typer.Option()] = Path("models/base"),
    device: Annotated[str, typer.Option()] = "auto",
) -> None:
    """Open one session, print the user's opening and its replies to the given agent messages."""
    from mimesis_rl.cli._store import sweep_if_store
    from mimesis_rl.data.schema import GoalCard
    from mimesis_rl.envs.protocols import SessionSpec
    from mimesis_rl.simulator.runtime import UserSimulator

    sweep_if_store(model)
    sim = UserSimulator.load(model, base_model=base_model, device=device)
    sessions = sim.start([SessionSpec(goal=GoalCard(text=goal), domain=domain)])
    reply = sim.opening(sessions)[0]
    typer.echo(f"user: {reply.message}    [thinks: {reply.reasoning}]")
    for text in message:
        if reply.ended:
            break
        typer.echo(f"agent: {text}")
        reply = sim.respond(sessions, [text])[0]
        typer.echo(f"user: {reply.message}    [thinks: {reply.reasoning}]")
