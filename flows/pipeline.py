"""The `mimesis-pipeline` flow: one Prefect task per DVC stage, run in dependency order.

    python -m flows.pipeline [--profile tiny] [--until split] [--force]

DVC decides freshness (an up-to-date stage is a no-op) and keeps the cache; Prefect adds retries,
logs, the schedule and the summary. Works without a Prefect server (Prefect starts a temporary one).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task

from flows.dag import stage_order
from mimesis_rl.config import load_params, project_root, set_profile, tracking_uri
from mimesis_rl.params import SECTIONS, ParamsError, check_params
from mimesis_rl.tracking import PARENT_RUN_ENV, pipeline_run


def _stage_env() -> dict[str, str]:
    """The environment DVC's stage commands run in: our venv first, so `python` is the project's."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env.setdefault("DVC_NO_ANALYTICS", "1")
    return env


def dvc_command(*args: str, root: Path, echo: Callable[[str], None] | None = None) -> tuple[int, str]:
    """Run one DVC command in `root` (never two at once: the flow is sequential).

    Output is streamed line by line to `echo` as it arrives, so long stages show progress.
    """
    dvc = Path(sys.executable).parent / "dvc"
    cmd = [str(dvc) if dvc.exists() else "dvc", *args]
    lines: list[str] = []
    with subprocess.Popen(cmd, cwd=root, env=_stage_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            lines.append(line)
            if echo and line.strip():
                echo(line)
    return proc.returncode, "\n".join(lines)


@task
def run_stage(stage: str, root: str, force: bool = False) -> str:
    """`dvc repro --single-item STAGE`; the stage's own MLflow run nests under the pipeline run."""
    logger = get_run_logger()
    args = ["repro", "--single-item", stage] + (["--force"] if force else [])
    code, output = dvc_command(*args, root=Path(root), echo=lambda line: logger.info("%s | %s", stage, line))
    if code != 0:
        tail = "\n".join(output.strip().splitlines()[-25:])
        raise RuntimeError(f"stage {stage!r} failed (exit {code}):\n{tail}")
    return "skipped (up to date)" if "didn't change, skipping" in output else "ran"


@task(name="params-check")
def params_check(path: str, stages: list[str]) -> str:
    """The flow's first step: every section and profile of params.yaml typed and checked
    (mimesis_rl.params), so a typo fails here, naming the key, before any stage runs; a section one
    of the stages reads must be there."""
    raw = check_params(path, complete=False)
    wanted = {s.split("@", 1)[0] for s in stages} & set(SECTIONS)
    missing = sorted(s for s in wanted if not isinstance(raw.get(s), dict))
    if missing:
        raise ParamsError(path, [f"{path}: missing section(s) {', '.join(missing)} "
                                 "(read by the stages to run)"])
    return f"{path}: OK (profiles: {', '.join(sorted(raw.get('profiles') or {}))})"


@flow(name="mimesis-pipeline", log_prints=True)
def pipeline(profile: str | None = None, until: str | None = None, force: bool = False,
             force_stages: list[str] | None = None, root: str | None = None) -> dict[str, Any]:
    """Run every stage of dvc.yaml (or up to `until`) under one parent MLflow run.

    `force` reruns every stage; `force_stages` only those (e.g. `ingest` when sources outside
    the repo may have new data that DVC cannot see).
    """
    root_path = Path(root) if root else project_root()
    stages = stage_order(root_path / "dvc.yaml", until)
    params_check(str(root_path / "params.yaml"), stages)
    if profile:
        set_profile(profile, root_path / "params.yaml")
    params = load_params(root_path / "params.yaml")
    retries = int(params.get("pipeline", {}).get("retries", 0))
    delay = float(params.get("pipeline", {}).get("retry_delay_seconds", 5))
    status: dict[str, str] = {}
    with pipeline_run(params={"profile": params["profile"], "until": until or "", "stages": ",".join(stages)},
                      tags={"mimesis.profile": params["profile"]}, root=root_path) as run:
        for stage in stages:
            status[stage] = run_stage.with_options(name=stage, retries=retries, retry_delay_seconds=delay)(
                stage, str(root_path), force or stage in (force_stages or []))
        parent_id = run.info.run_id
    summary = {"profile": params["profile"], "stages": status, "mlflow_parent_run": parent_id,
               "tracking_uri": tracking_uri(root_path)}
    print(_where_to_look(summary, root_path))
    return summary


def _where_to_look(summary: dict[str, Any], root: Path) -> str:
    lines = [f"MIMESIS pipeline finished (profile {summary['profile']}):"]
    lines += [f"  {stage:<14} {state}" for stage, state in summary["stages"].items()]
    lines += [
        f"MLflow parent run {summary['mlflow_parent_run']} in {summary['tracking_uri']}",
        "  browse it with `make ui` (http://127.0.0.1:5000)",
        f"Stage metrics: {root / 'metrics'} (`dvc metrics show`); reports: {root / 'reports'}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.pipeline", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="switch params.yaml to this profile first (demo | tiny)")
    parser.add_argument("--until", help="stop after this stage (runs its ancestors first)")
    parser.add_argument("--force", action="store_true", help="rerun stages even when DVC says they are fresh")
    args = parser.parse_args(argv)
    os.environ.pop(PARENT_RUN_ENV, None)
    try:
        pipeline(profile=args.profile, until=args.until, force=args.force)
    except (ParamsError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
