"""`mimesis infra up|down|status`: local MLflow + Prefect servers and a worker, as child processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Local tracking/orchestration servers (MLflow, Prefect server + worker).",
                  no_args_is_help=True)

RunDir = Annotated[Path | None, typer.Option(help="pid files, logs and the servers' stores "
                                                  "(default: <checkout>/.servers)")]


def _run_dir(run_dir: Path | None) -> Path:
    from mimesis_rl.config import project_root

    return (run_dir or project_root() / ".servers").resolve()


@app.command()
def up(
    run_dir: RunDir = None,
    mlflow_port: Annotated[int, typer.Option(help="MLflow tracking server port")] = 5000,
    prefect_port: Annotated[int, typer.Option(help="Prefect server port")] = 4200,
    pool: Annotated[str, typer.Option(help="Prefect work pool (process type) the worker serves")] = "mimesis",
    timeout: Annotated[float, typer.Option(help="seconds to wait for each health check")] = 180.0,
    gpu_worker: Annotated[bool, typer.Option(help="also start a worker on the `mimesis-gpu` pool (queue "
                                                  "`gpu`): this machine runs the training stages")] = False,
) -> None:
    """Start MLflow, the Prefect server, create the `mimesis` and `mimesis-gpu` pools, deploy
    infra/prefect/prefect.yaml from this checkout and start a process worker, all on 127.0.0.1; return
    once all are healthy."""
    from mimesis_rl.tracking.servers import GPU_POOL, PortInUse, Servers, deployments
    from mimesis_rl.tracking.servers import up as start

    servers = Servers(_run_dir(run_dir), mlflow_port, prefect_port, pool, gpu_worker=gpu_worker)
    try:
        start(servers, timeout=timeout)
    except (PortInUse, RuntimeError, TimeoutError) as exc:
        typer.secho(str(exc), fg="red", err=True)
        raise typer.Exit(1) from exc
    workers = pool + (f" + {GPU_POOL}" if gpu_worker else f" ({GPU_POOL} has none: training runs on {pool})")
    typer.echo(f"MLflow  {servers.mlflow_uri}  |  Prefect {servers.prefect_api}  |  worker on {workers}")
    typer.echo("deployments: " + ", ".join(deployments(servers)))
    typer.echo(f"logs and pid files: {servers.run_dir}")
    typer.echo("point the project at them:")
    for key, value in servers.env().items():
        typer.echo(f"  export {key}={value}")


@app.command()
def down(run_dir: RunDir = None) -> None:
    """Stop every server `up` started from this run folder (SIGTERM, then SIGKILL after 20 s)."""
    from mimesis_rl.tracking.servers import down as stop

    stopped = stop(_run_dir(run_dir))
    typer.echo("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))


@app.command()
def status(run_dir: RunDir = None) -> None:
    """Which servers of this run folder are running (JSON)."""
    from mimesis_rl.tracking.servers import status as state

    typer.echo(json.dumps(state(_run_dir(run_dir)), indent=2))
