"""The `mimesis` command line. Sub-commands live one group per module in this package."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Annotated

import typer

from mimesis_rl.cli.data import app as data_app
from mimesis_rl.cli.envs import app as envs_app
from mimesis_rl.cli.infra import app as infra_app
from mimesis_rl.cli.label import app as label_app
from mimesis_rl.cli.lineage import register as register_lineage
from mimesis_rl.cli.params import app as params_app
from mimesis_rl.cli.serve import register as register_serve
from mimesis_rl.cli.sim import app as sim_app

app = typer.Typer(help="MIMESIS: realistic user simulators and the agents trained against them.",
                  no_args_is_help=True, pretty_exceptions_show_locals=False)
app.add_typer(data_app, name="data")
app.add_typer(envs_app, name="envs")
app.add_typer(sim_app, name="sim")
app.add_typer(label_app, name="label")
app.add_typer(infra_app, name="infra")
app.add_typer(params_app, name="params")
register_serve(app)
register_lineage(app)


def _in_project() -> str:
    from mimesis_rl.config import project_root

    root = project_root()
    if not (root / "dvc.yaml").exists():
        typer.secho(f"no dvc.yaml above {os.getcwd()}: run this from a MIMESIS checkout", fg="red", err=True)
        raise typer.Exit(2)
    return str(root)


@app.command()
def run(
    profile: Annotated[str | None, typer.Option(help="params profile: demo (default run) or tiny")] = None,
    until: Annotated[str | None, typer.Option(help="stop after this stage")] = None,
) -> None:
    """Run the whole pipeline (the Prefect flow over the DVC stages)."""
    root = _in_project()
    cmd = [sys.executable, "-m", "flows.pipeline"]
    if profile:
        cmd += ["--profile", profile]
    if until:
        cmd += ["--until", until]
    raise typer.Exit(subprocess.call(cmd, cwd=root))


@app.command()
def stage(name: str, force: Annotated[bool, typer.Option(help="rerun even if up to date")] = False) -> None:
    """Run one stage through DVC (`dvc repro --single-item NAME`)."""
    root = _in_project()
    cmd = ["dvc", "repro", "--single-item", name] + (["--force"] if force else [])
    raise typer.Exit(subprocess.call(cmd, cwd=root))


@app.command("export")
def export_command(
    model: Annotated[str, typer.Argument(help="simulator or agent: a folder or models:/NAME@ALIAS")],
    out: Annotated[str, typer.Argument(help="folder to write (replaced whole)")],
    base_model: Annotated[str, typer.Option(help="base for unbundled adapters")] = "models/base",
    fidelity: Annotated[str | None, typer.Option(help="sim_eval fidelity.json for the card")] = None,
    fidelity_row: Annotated[str | None, typer.Option(help="the model's row in that report")] = None,
) -> None:
    """Write a plain Hugging Face model folder: merged safetensors, tokenizer with a chat template that
    plays the user, generation_config.json (the registered decoding) and a model card (README.md)."""
    from mimesis_rl.cli._store import sweep_if_store
    from mimesis_rl.config import load_params
    from mimesis_rl.export import export_model

    try:
        params = load_params()
    except (FileNotFoundError, ValueError):
        params = {}
    try:
        sweep_if_store(model)
        info = export_model(model, out, base_model=base_model, fidelity=fidelity, fidelity_row=fidelity_row,
                            params=params)
    except (FileNotFoundError, LookupError, ValueError) as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"exported {info.role} {model} -> {out} (base: {info.base_model or info.base_kind}, "
               f"registry: {info.registry.get('name', '-')} v{info.registry.get('version', '-')})")


@app.command()
def info() -> None:
    """Versions, active profile, paths and the tracking URI."""
    import importlib.metadata as md

    from mimesis_rl.config import load_params, project_root, tracking_uri

    root = project_root()
    typer.echo(f"project root : {root}")
    try:
        params = load_params(root / "params.yaml")
        typer.echo(f"profile      : {params['profile']}")
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"profile      : ({exc})")
    typer.echo(f"tracking URI : {tracking_uri(root)}")
    typer.echo(f"python       : {sys.version.split()[0]}")
    for pkg in ("mimesis-rl", "torch", "transformers", "trl", "peft", "deepspeed", "mlflow", "prefect", "dvc",
                "great_expectations"):
        try:
            version = md.version(pkg)
        except md.PackageNotFoundError:
            version = "not installed"
        typer.echo(f"{pkg:<13}: {version}")


def main() -> None:
    # Threads explicit in every entry point (torch's default may count cores this container cannot
    # use); through the environment so commands that never load torch do not pay its import.
    cores = os.environ.get("MIMESIS_THREADS") or str(len(os.sched_getaffinity(0)))
    os.environ.setdefault("OMP_NUM_THREADS", cores)
    app()
