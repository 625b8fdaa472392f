"""Register a trained agent as a version of `mimesis-agent`.

One registered model for all variants; each variant has its own alias `candidate-<variant>`
(`candidate-sft`, `candidate-assistant`, `candidate-mimesis`, `candidate-mimesis_csd`) on its newest
version, and every version is tagged with the user it trained against (and that user's registry
version when it came from the registry), the data version, CSD on/off, λ and the commit (the stage
run's tag). Only the promotion gate moves `champion`. The logging itself is the simulator's
(`log_simulator`: same folder shape, base bundled when small, else registered as `mimesis-base` and
named by URI in the manifest).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlflow

from mimesis_rl.simulator.registry import log_simulator
from mimesis_rl.tracking.registration import RegistrySettings
from mimesis_rl.tracking.runs import PARENT_RUN_ENV

REGISTERED_NAME = "mimesis-agent"


def user_version_tag(user_spec: str) -> str:
    """The registry version a `learned:models:/name@alias` user resolves to now (else the spec itself)."""
    body = user_spec.split(":", 1)[1] if user_spec.startswith("learned:") else ""
    if body.startswith("models:/") and "@" in body:
        name, alias = body[len("models:/") :].split("@", 1)
        try:
            version = mlflow.MlflowClient().get_model_version_by_alias(name, alias)
            return f"models:/{name}/{version.version}"
        except mlflow.exceptions.MlflowException:
            return body
    return user_spec


def log_agent(
    folder: str | Path,
    variant: str,
    *,
    user: str,
    data_version: str,
    csd: bool = False,
    csd_lambda: float = 0.0,
    registry: RegistrySettings | None = None,
    extra_tags: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Log + register (as `registry.name`, default `mimesis-agent`; the alias is always
    `candidate-<variant>`); returns {registered_version, registered_alias}."""
    registry = registry or RegistrySettings()
    name = registry.name or REGISTERED_NAME
    tags = {
        "mimesis.role": "agent",
        "mimesis.variant": variant,
        "mimesis.trained_against": user,
        "mimesis.simulator_version": user_version_tag(user),
        "mimesis.csd": str(bool(csd)).lower(),
        "mimesis.csd_lambda": str(csd_lambda),
        **{k: str(v) for k, v in (extra_tags or {}).items()},
    }
    folder_spec = user.split(":", 1)[1] if user.startswith("learned:") else ""
    if folder_spec and Path(folder_spec).is_dir():  # a DVC output: its md5 joins dvc.lock and the sim run
        from mimesis_rl.tracking import content_hash

        tags["mimesis.simulator_md5"] = content_hash(folder_spec)
    alias = f"candidate-{variant}"
    version = log_simulator(
        folder,
        name=name,
        alias=alias,
        data_version=data_version,
        parent_run_id=os.environ.get(PARENT_RUN_ENV),
        bundle=registry.bundle_base,
        max_bundle_mb=registry.max_bundle_mb,
        tags=tags,
    )
    mlflow.MlflowClient().update_model_version(
        name, version.version, description=f"agent `{variant}` trained against {user}"
    )
    return {"registered_version": int(version.version), "registered_alias": alias}
