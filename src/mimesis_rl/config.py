"""params.yaml loading: shared sections plus the active profile's overrides, deep-merged."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

PARAMS_FILE = "params.yaml"
PROFILE_ENV = "MIMESIS_PROFILE"
# params.yaml with its active profile laid over the sections: every stage's DVC params (the `params`
# stage writes it, `mimesis params resolve`). DVC compares params by value: a stage that listed
# `profiles` went stale on any edit to any profile (the tiny one the tests use included); listing its
# resolved sections here, an edit reruns exactly the stages whose settings it changed.
RESOLVED_FILE = "params.resolved.yaml"
RESOLVED_HEADER = ("# Written by the `params` stage (`mimesis params resolve`): params.yaml with its active\n"
                   "# profile laid over the sections, the stages' DVC params. Edit params.yaml, not this.\n")


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


def resolved_text(path: str | Path, params: Mapping[str, Any] | None = None) -> str:
    """`RESOLVED_FILE`'s text for the params file at `path` (checked and merged by `load_params`), or for
    `params` already loaded from it (a stage's start-up reads the file once)."""
    merged = dict(params) if params is not None else load_params(path)
    return RESOLVED_HEADER + yaml.safe_dump(merged, sort_keys=False, allow_unicode=True)


def write_resolved(path: str | Path, out: str | Path) -> Path:
    """Write the resolved params of `path` to `out`; the same text is not rewritten."""
    out = Path(out)
    text = resolved_text(path)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return out


def resolved_stale(path: str | Path, resolved: str | Path,
                   params: Mapping[str, Any] | None = None) -> str | None:
    """Why the file `resolved` does not match the params file at `path` now (None when it does): a stage
    DVC runs would otherwise record in dvc.lock settings other than the ones it read (`params`: those
    settings, already loaded from `path`)."""
    resolved = Path(resolved)
    if not resolved.exists():
        return f"{resolved} is missing: run `dvc repro params` (`mimesis run` runs it first)"
    if resolved.read_text() != resolved_text(path, params):
        return (f"{resolved} is older than {path}: run `dvc repro params` (`mimesis run` runs it first), "
                "then this stage")
    return None
