"""Log a simulator folder to MLflow and register it as a new version of `mimesis-simulator`.

The version's source is the run's `simulator/` artifact folder (manifest with base reference,
turn format and generation config; adapter or weights; tokenizer; the base itself when small), so
`models:/mimesis-simulator@candidate` downloads to a folder `UserSimulator.load` (and the rollout
engine) read directly. Each version is tagged with its data version, its run and the pipeline's
parent run; only the promotion gate moves `champion`, this module sets `candidate`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities.model_registry import ModelVersion

from mimesis_rl.models.artifact import bundle_base, folder_size, read_manifest, resolve_base

log = logging.getLogger(__name__)

REGISTERED_NAME = "mimesis-simulator"
ARTIFACT_PATH = "simulator"


def _ensure_registered_model(client: mlflow.MlflowClient, name: str) -> None:
    try:
        client.get_registered_model(name)
    except mlflow.exceptions.MlflowException:
        with contextlib.suppress(mlflow.exceptions.MlflowException):  # created concurrently
            client.create_registered_model(name, description="MIMESIS user simulators")


def log_simulator(folder: str | Path, *, name: str = REGISTERED_NAME, alias: str | None = "candidate",
                  data_version: str = "unknown", parent_run_id: str | None = None,
                  bundle: str | bool = "auto", max_bundle_mb: float = 200.0,
                  tags: Mapping[str, str] | None = None) -> ModelVersion:
    """Log `folder` into the active run and register it; returns the new version (alias set and checked).

    bundle: copy the base model into the artifact (`auto`: when it is under `max_bundle_mb`), so
    the registered version loads on a machine without the project's `models/base`.
    """
    run = mlflow.active_run()
    if run is None:
        raise RuntimeError("log_simulator needs an active MLflow run (the stage run)")
    folder = Path(folder)
    manifest = read_manifest(folder)
    base_dir = resolve_base(folder, manifest) if manifest.kind != "full" else None
    with tempfile.TemporaryDirectory(prefix="mimesis-log-") as tmp:
        staged = Path(tmp) / ARTIFACT_PATH
        shutil.copytree(folder, staged)
        bundled = False
        if base_dir is not None and not (staged / "base").exists():
            small = folder_size(base_dir) / 2**20 <= max_bundle_mb
            if bundle is True or (bundle == "auto" and small):
                bundle_base(staged, base_dir)
                bundled = True
        mlflow.log_artifacts(str(staged), artifact_path=ARTIFACT_PATH)
    client = mlflow.MlflowClient()
    _ensure_registered_model(client, name)
    version_tags = {
        "mimesis.data_version": data_version,
        "mimesis.run_id": run.info.run_id,
        "mimesis.parent_run_id": parent_run_id or run.data.tags.get("mimesis.parent_run_id", run.info.run_id),
        "mimesis.kind": manifest.kind,
        "mimesis.base": str(manifest.base.get("path", "")),
        "mimesis.base_bundled": str(bundled).lower(),
        "mimesis.format_version": manifest.format.get("version", ""),
        "mimesis.stage": str(manifest.extra.get("stage", "")),
        **{k: str(v) for k, v in (tags or {}).items()},
    }
    git = run.data.tags.get("mimesis.git_commit")
    if git:
        version_tags["mimesis.git_commit"] = git
    version = client.create_model_version(name, source=f"{run.info.artifact_uri}/{ARTIFACT_PATH}",
                                          run_id=run.info.run_id, tags=version_tags,
                                          description=f"{manifest.kind} simulator from stage "
                                                      f"{manifest.extra.get('stage', '?')}")
    if alias:
        client.set_registered_model_alias(name, alias, version.version)
        check = client.get_model_version_by_alias(name, alias)
        if str(check.version) != str(version.version):
            raise RuntimeError(f"alias {alias!r} of {name} points at v{check.version}, "
                               f"expected v{version.version}")
    mlflow.set_tags({"mimesis.registered_model": name, "mimesis.registered_version": version.version})
    log.info("registered %s v%s (alias %s) from run %s", name, version.version, alias, run.info.run_id)
    return version


def version_info(name: str = REGISTERED_NAME, alias: str = "candidate") -> dict[str, Any]:
    """The version an alias points at, with its tags (for reports and checks)."""
    version = mlflow.MlflowClient().get_model_version_by_alias(name, alias)
    return {"name": name, "alias": alias, "version": str(version.version), "run_id": version.run_id,
            "source": version.source, "tags": dict(version.tags)}
