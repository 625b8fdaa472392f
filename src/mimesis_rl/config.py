"""params.yaml loading: shared sections plus the active profile's overrides, deep-merged."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

PARAMS_FILE = "params.yaml"
PROFILE_ENV = "MIMESIS_PROFILE"


def project_root(start: str | Path | None = None) -> Path:
    """The folder holding params.yaml, searching upwards from `start` (default: cwd)."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PARAMS_FILE).exists():
            return folder
    return here


def tracking_uri(root: str | Path | None = None) -> str:
    """The MLflow store: MLFLOW_TRACKING_URI if set, else the checkout's embedded `sqlite:///<root>/mlflow.db`.

    Here rather than in `tracking`: where the store is belongs to the project's layout, and the low layers
    that read a model from it (`models.inference.sources`, the panel's registry look-up) must not import
    the run machinery."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    root = Path(root) if root else project_root()
    return f"sqlite:///{(root / 'mlflow.db').resolve()}"


def load_params(path: str | Path | None = None, profile: str | None = None) -> dict[str, Any]:
    """Read params.yaml and apply `profiles.<profile>` over the top-level sections.

    The profile comes from the argument, else the file's `profile:` key. An environment
    override would be invisible to DVC, so stages never read MIMESIS_PROFILE. The file is checked
    first (mimesis_rl.params.check): a malformed one raises ParamsError naming the file and key path.
    """
    from mimesis_rl.params.check import check_params, deep_merge

    path = Path(path) if path else project_root() / PARAMS_FILE
    raw = check_params(path, complete=False)  # typed and strict: a typo is an error naming the key
    profiles = raw.pop("profiles", {}) or {}
    name = profile or raw.get("profile", "demo")
    if name not in profiles:
        raise ValueError(f"{path}: unknown profile {name!r}; known: {', '.join(sorted(profiles)) or 'none'}")
    params = deep_merge(raw, profiles[name] or {})
    params["profile"] = name
    return params


def set_profile(name: str, path: str | Path | None = None) -> None:
    """Point params.yaml at another profile, keeping its comments (DVC sees the change)."""
    path = Path(path) if path else project_root() / PARAMS_FILE
    text = path.read_text()
    profiles = (yaml.safe_load(text) or {}).get("profiles", {})
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(sorted(profiles))}")
    new, count = re.subn(r"(?m)^profile:\s*\S+", f"profile: {name}", text, count=1)
    if count == 0:
        new = f"profile: {name}\n" + text
    if new != text:
        path.write_text(new)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; for logging params to MLflow."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out
