"""The `mimesis-retrain` flow: the scheduled retrain our users run weekly.

    python -m flows.retrain            # one retrain now
    python -m flows.retrain --serve    # serve it on the cron in params.yaml (pipeline.schedule_cron)

1. What changed? DVC's own view first: `dvc update` on every imported source (`dvc import`,
   `dvc import-url`) and `dvc status` over the pipeline (deps, params, code). Sources DVC does not
   track (the adapters' embedded corpus, paths outside the repo) are compared by content hash with
   the `mimesis.input.<path>` tags of the last finished run of each source stage (`ingest`).
2. Nothing changed: the flow ends early and says so (no stage runs, nothing is registered).
3. Otherwise the `mimesis-pipeline` flow reruns what the change invalidates (the source stages are
   forced when only untracked sources changed), the `promote` stage gates the candidates, and a
   Prefect markdown artifact reports what changed, the metrics against the champion and the decision.

A failing stage raises, so the flow run ends FAILED with the stage's error; `promote` never ran, so
`champion` is untouched. One retrain per checkout at a time: the deployment's concurrency limit is 1
and the flow holds a lock file in `.dvc/tmp/` while it runs.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from flows.dag import stage_order
from flows.pipeline import _stage_env, pipeline
from mimesis_rl.config import load_params, project_root, set_profile, tracking_uri
from mimesis_rl.tracking import content_hash
from mimesis_rl.tracking.runs import CHECKOUT_TAG, experiment_name

ARTIFACT_KEY = "mimesis-retrain"
DEFAULTS = {"source_stages": ["ingest"], "decision": "reports/promote/decision.json"}


def retrain_settings(params: dict[str, Any]) -> dict[str, Any]:
    """params.yaml `pipeline.retrain`, with the defaults filled in."""
    section = (params.get("pipeline") or {}).get("retrain") or {}
    if not isinstance(section, dict):
        raise ValueError(f"params.yaml `pipeline.retrain` must be a mapping, got {type(section).__name__}")
    return {**DEFAULTS, **section}


def _dvc(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    dvc = Path(sys.executable).parent / "dvc"
    return subprocess.run([str(dvc) if dvc.exists() else "dvc", *args], cwd=root, env=_stage_env(),
                          capture_output=True, text=True)


def _out_md5(dvc_file: Path) -> str:
    data = yaml.safe_load(dvc_file.read_text()) or {}
    return ",".join(str(o.get("md5") or o.get("etag") or "") for o in data.get("outs") or [])


def update_imports(root: Path) -> dict[str, str]:
    """`dvc update` every imported source; {dvc file: 'old md5 -> new md5'} for those that changed."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        imports = [Path(s.path) for s in repo.index.stages if s.is_import]  # imports are always frozen
    changed: dict[str, str] = {}
    for dvc_file in imports:
        before = _out_md5(dvc_file)
        done = _dvc(root, "update", str(dvc_file))
        if done.returncode != 0:
            raise RuntimeError(f"`dvc update {dvc_file}` failed (exit {done.returncode}):\n"
                               f"{(done.stdout + done.stderr).strip()[-2000:]}")
        after = _out_md5(dvc_file)
        if after != before:
            changed[dvc_file.relative_to(root).as_posix()] = f"{before or 'none'} -> {after}"
    return changed


def stale_stages(root: Path, stages: list[str]) -> dict[str, Any]:
    """DVC's `status --json` for these stages: {stage: what changed}, empty when all are up to date."""
    done = _dvc(root, "status", "--json", *stages)
    if done.returncode != 0:
        raise RuntimeError(f"`dvc status` failed (exit {done.returncode}):\n{done.stderr.strip()[-2000:]}")
    text = done.stdout.strip()
    start = text.find("{")
    if start < 0:
        raise RuntimeError(f"`dvc status --json` printed no JSON: {text[-500:]!r}")
    return json.loads(text[start:])


def _last_run_inputs(stage: str, root: Path) -> dict[str, str] | None:
    """The `mimesis.input.*` tags of the newest FINISHED run of `stage` in this checkout."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri(root))
    experiment = client.get_experiment_by_name(experiment_name(load_params(root / "params.yaml")))
    if experiment is None:
        return None
    query = f"tags.`mimesis.stage` = '{stage}' and attributes.status = 'FINISHED'"
    runs = client.search_runs([experiment.experiment_id], filter_string=query,
                              order_by=["attributes.start_time DESC"], max_results=50)
    checkout = str(root.resolve())
    for run in runs:
        if run.data.tags.get(CHECKOUT_TAG, checkout) == checkout:
            return {k[len("mimesis.input."):]: v for k, v in run.data.tags.items()
                    if k.startswith("mimesis.input.")}
    return None


def untracked_sources(root: Path, stages: list[str]) -> dict[str, str]:
    """Source files whose content differs from what the last run of a source stage recorded."""
    changed: dict[str, str] = {}
    for stage in stages:
        recorded = _last_run_inputs(stage, root)
        if recorded is None:
            changed[f"{stage} (no finished run recorded)"] = "first retrain of this checkout"
            continue
        for path, old in sorted(recorded.items()):
            full = Path(path) if Path(path).is_absolute() else root / path
            new = content_hash(full)
            if new != old:
                changed[path] = f"{old} -> {new}"
    return changed


@task
def detect_changes(root: str, source_stages: list[str]) -> dict[str, Any]:
    """Everything that changed since the last retrain, by DVC's view and by content hash."""
    root_path = Path(root)
    imports = update_imports(root_path)
    stages = stage_order(root_path / "dvc.yaml")
    stale = stale_stages(root_path, stages)
    sources = untracked_sources(root_path, [s for s in source_stages if s in stages])
    return {"imports": imports, "stale_stages": stale, "untracked_sources": sources,
            "changed": bool(imports or stale or sources)}


def _changes_markdown(changes: dict[str, Any]) -> list[str]:
    lines = []
    for path, what in changes["imports"].items():
        lines.append(f"- imported source `{path}`: {what}")
    for path, what in changes["untracked_sources"].items():
        lines.append(f"- source `{path}`: {what}")
    for stage, why in changes["stale_stages"].items():
        lines.append(f"- stage `{stage}` is stale: `{json.dumps(why)[:300]}`")
    return lines or ["- nothing"]


def _decision_markdown(decision: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for kind, d in decision.items():
        if isinstance(d, str):
            lines += [f"### {kind}", "", d, ""]
            continue
        verdict = "**promoted**" if d["promoted"] else "**not promoted** (champion unchanged)"
        lines += [f"### {kind}: {d['registered_model']} version {d['candidate_version']} — {verdict}", "",
                  f"Champion before this retrain: version {d['champion_version'] or '(none)'}.", "",
                  "| metric | candidate | champion |", "|---|---|---|"]
        for name in sorted(set(d["candidate"]) | set(d["champion"])):
            cand, champ = d["candidate"].get(name), d["champion"].get(name)
            lines.append(f"| {name} | {_metric(cand)} | {_metric(champ)} |")
        lines += [""] + [f"- {r}" for r in d["reasons"]] + [""]
    return lines


def _metric(m: dict[str, Any] | None) -> str:
    if not m:
        return "—"
    has_ci = m.get("low") is not None and m.get("high") is not None
    ci = f" [{m['low']:.4g}, {m['high']:.4g}]" if has_ci else ""
    return f"{m['value']:.4g}{ci}"


def report_markdown(changes: dict[str, Any], decision: dict[str, Any] | None, summary: dict[str, Any] | None,
                    decision_path: str) -> str:
    """The retrain's artifact: what changed, each candidate's metrics against the champion, the gate."""
    lines = ["# MIMESIS retrain", "", "## What changed", "", *_changes_markdown(changes), ""]
    if summary is None:
        lines += ["Nothing changed since the last retrain: no stage ran, nothing was registered."]
        return "\n".join(lines)
    lines += ["## Stages", ""] + [f"- `{s}`: {state}" for s, state in summary["stages"].items()]
    lines += ["", f"MLflow parent run `{summary['mlflow_parent_run']}` in `{summary['tracking_uri']}`", "",
              "## Promotion gate", ""]
    lines += _decision_markdown(decision) if decision else [f"No gate decision: `{decision_path}` not found "
                                                            "(no `promote` stage in this pipeline)."]
    return "\n".join(lines)


@contextmanager
def checkout_lock(root: Path) -> Iterator[None]:
    """One retrain per checkout: a second one fails at once instead of racing DVC and the registry."""
    folder = root / ".dvc" / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "mimesis-retrain.lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RuntimeError(f"another retrain holds {folder / 'mimesis-retrain.lock'} "
                               "(one retrain per checkout)") from exc
        handle.write(str(os.getpid()))
        handle.flush()
        yield


@flow(name="mimesis-retrain", log_prints=True)
def retrain(profile: str | None = None, root: str | None = None, force: bool = False) -> dict[str, Any]:
    """Retrain when a source changed (or `force`), gate the candidates, publish a markdown report."""
    logger = get_run_logger()
    root_path = Path(root) if root else project_root()
    with checkout_lock(root_path):
        if profile:
            set_profile(profile, root_path / "params.yaml")
        settings = retrain_settings(load_params(root_path / "params.yaml"))
        changes = detect_changes(str(root_path), list(settings["source_stages"]))
        if not changes["changed"] and not force:
            print("Nothing changed since the last retrain (DVC status clean, no import updated, "
                  "source hashes as last ingested): ending early, nothing registered.")
            create_markdown_artifact(report_markdown(changes, None, None, settings["decision"]),
                                     key=ARTIFACT_KEY, description="retrain: nothing changed")
            return {"changed": False, "changes": changes}
        logger.info("changes: %s", json.dumps(changes, default=str)[:2000])
        decision_path = root_path / settings["decision"]
        before = decision_path.stat().st_mtime_ns if decision_path.exists() else None
        forced = list(settings["source_stages"]) if changes["untracked_sources"] else []
        summary = pipeline(root=str(root_path), force_stages=forced)
        decision = None
        if decision_path.exists() and decision_path.stat().st_mtime_ns != before:
            decision = json.loads(decision_path.read_text())
        elif decision_path.exists():
            logger.warning("%s was not rewritten by this retrain (promote was up to date)", decision_path)
        markdown = report_markdown(changes, decision, summary, settings["decision"])
        artifact = create_markdown_artifact(markdown, key=ARTIFACT_KEY, description="retrain report")
        print(markdown)
        return {"changed": True, "changes": changes, "pipeline": summary, "decision": decision,
                "artifact_id": str(artifact)}


def deployment_name(root: str | Path) -> str:
    """One deployment per checkout (its concurrency limit of 1 is then per checkout)."""
    digest = hashlib.sha1(str(Path(root).resolve()).encode()).hexdigest()[:8]
    return f"mimesis-retrain-{digest}"


def deployment(root: str | Path | None = None, profile: str | None = None) -> Any:
    """The scheduled deployment of this checkout: cron from params.yaml, at most one run at a time
    (later ones queue: ENQUEUE)."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    root_path = Path(root) if root else project_root()
    cron = load_params(root_path / "params.yaml")["pipeline"]["schedule_cron"]
    return retrain.to_deployment(
        name=deployment_name(root_path), cron=cron,
        concurrency_limit=ConcurrencyLimitConfig(limit=1,
                                                 collision_strategy=ConcurrencyLimitStrategy.ENQUEUE),
        parameters={"profile": profile, "root": str(root_path.resolve())})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.retrain", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", help="params profile (demo | tiny)")
    parser.add_argument("--force", action="store_true", help="run the pipeline even when nothing changed")
    parser.add_argument("--serve", action="store_true", help="serve on the params.yaml cron schedule")
    args = parser.parse_args(argv)
    if args.serve:
        from prefect import serve

        serve(deployment(profile=args.profile), limit=1)
    else:
        retrain(profile=args.profile, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
