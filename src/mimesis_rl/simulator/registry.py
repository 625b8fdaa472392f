"""Log a simulator folder to MLflow and register it as a new version of `mimesis-simulator`.

The version's source is the run's `simulator/` artifact folder (manifest with base reference,
turn format and generation config; adapter or weights; tokenizer; the base itself when small), so
`models:/mimesis-simulator@candidate` downloads to a folder `UserSimulator.load` (and the rollout
engine) read directly. Each version is tagged with its data version, its run and the pipeline's
parent run; only the promotion gate moves `champion`, this module sets `candidate`.

A base too large to bundle is registered once as its own model, `mimesis-base`: one version per
content hash (DVC's md5 of the folder), reused by every simulator and agent version over that base.
Their manifests record its URI (`base.uri`), so a version loads from the registry alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities.model_registry import ModelVersion

from mimesis_rl.models.artifact import bundle_base, folder_size, read_manifest, write_manifest
from mimesis_rl.models.inference.sources import resolve_base
from mimesis_rl.tracking.lineage import content_hash
from mimesis_rl.tracking.registration import RegistrySettings, bundle_choice

log = logging.getLogger(__name__)

REGISTERED_NAME = "mimesis-simulator"
ARTIFACT_PATH = "simulator"
BASE_NAME = "mimesis-base"
BASE_HASH_TAG = "mimesis.content_hash"


def _ensure_registered_model(client: mlflow.MlflowClient, name: str,
                             description: str = "MIMESIS user simulators") -> None:
    try:
        client.get_registered_model(name)
    except mlflow.exceptions.MlflowException:
        with contextlib.suppress(mlflow.exceptions.MlflowException):  # created concurrently
            client.create_registered_model(name, description=description)


def register_base(base_dir: str | Path, *, name: str = BASE_NAME, digest: str | None = None) -> str:
    """`models:/<name>/<n>` holding exactly this base folder: the version with the same content hash
    when there is one, else a new version logged into the active run. Registered once, reused always."""
    base_dir = Path(base_dir)
    digest = digest or content_hash(base_dir)
    client = mlflow.MlflowClient()
    _ensure_registered_model(client, name, "MIMESIS base models (one version per content hash)")
    for v in client.search_model_versions(f"name = '{name}'"):
        if v.tags.get(BASE_HASH_TAG) == digest:
            return f"models:/{name}/{v.version}"
    run = mlflow.active_run()
    if run is None:
        raise RuntimeError("register_base needs an active MLflow run (the stage run) to log the base into")
    path = f"base-{digest.removesuffix('.dir')[:12]}"
    mlflow.log_artifacts(str(base_dir), artifact_path=path)
    manifest_path = base_dir / "mimesis_base.json"
    kind = json.loads(manifest_path.read_text()).get("kind", "") if manifest_path.exists() else ""
    version = client.create_model_version(
        name, source=f"{run.info.artifact_uri}/{path}", run_id=run.info.run_id,
        tags={BASE_HASH_TAG: digest, "mimesis.base_path": str(base_dir), "mimesis.base_kind": str(kind)},
        description=f"base model {base_dir} (md5 {digest})")
    log.info("registered base %s as %s v%s", base_dir, name, version.version)
    return f"models:/{name}/{version.version}"


def log_simulator(folder: str | Path, *, name: str = REGISTERED_NAME, alias: str | None = "candidate",
                  data_version: str = "unknown", parent_run_id: str | None = None,
                  bundle: str | bool = "auto", max_bundle_mb: float = 200.0,
                  tags: Mapping[str, str] | None = None) -> ModelVersion:
    """Log `folder` into the active run and register it; returns the new version (alias set and checked).

    bundle: `always` copies the base into the artifact, `never` registers it as `mimesis-base` (once per
    content hash) and records its URI in the manifest, `auto` bundles under `max_bundle_mb`, else
    registers. Either way the version loads on a machine without the project's `models/base`.
    """
    run = mlflow.active_run()
    if run is None:
        raise RuntimeError("log_simulator needs an active MLflow run (the stage run)")
    choice = bundle_choice(bundle)
    folder = Path(folder)
    manifest = read_manifest(folder)
    base_dir = resolve_base(folder, manifest) if manifest.kind != "full" else None
    base_uri = ""
    with tempfile.TemporaryDirectory(prefix="mimesis-log-") as tmp:
        staged = Path(tmp) / ARTIFACT_PATH
        shutil.copytree(folder, staged)
        bundled = (staged / "base").is_dir()
        if base_dir is not None and not bundled:
            small = folder_size(base_dir) / 2**20 <= max_bundle_mb
            if choice == "always" or (choice == "auto" and small):
                bundle_base(staged, base_dir)
                bundled = True
            else:  # the version names its base by registry URI: it loads from the registry alone
                digest = content_hash(base_dir)
                base_uri = register_base(base_dir, digest=digest)
                manifest.base = {**manifest.base, "uri": base_uri, "md5": digest}
                write_manifest(staged, manifest)
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
        "mimesis.base_uri": base_uri or manifest.base.get("uri", ""),
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


def register_simulator(output_dir: str, registry: RegistrySettings, data_version: str,
                       name: str = REGISTERED_NAME, tags: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A training stage's last step: log its simulator folder into the stage run and register a new
    version of `registry.name` (else `name`) (params.yaml `<stage>.registry`; `register: false` skips it)."""
    if not registry.register:
        return {}
    import os

    from mimesis_rl.tracking import PARENT_RUN_ENV

    version = log_simulator(output_dir, name=registry.name or name, alias=registry.alias,
                            data_version=data_version, parent_run_id=os.environ.get(PARENT_RUN_ENV),
                            bundle=registry.bundle_base, max_bundle_mb=registry.max_bundle_mb, tags=tags)
    return {"registered_version": int(version.version)}
