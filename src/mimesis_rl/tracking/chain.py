"""Lineage you can query: which simulator, which data, which code and which gate decision made a version.

    chain = lineage("models:/mimesis-agent@champion", root=".")

walks registry version -> the stage run that registered it (commit, params, the DVC md5 of each
input as tagged by `stage_run`: `mimesis.input.<path>`) -> the sibling stage runs of the same
pipeline run (ingest, split, ... with their own commits, params and inputs) -> for an agent, the
simulator version it trained against, and so on. Each input md5 is checked against `dvc.lock` when
the checkout has one, so a link can be verified by hand (`dvc.lock` and the MLflow UI). A version whose
base is registered rather than bundled shows it (`mimesis.base_uri`, a `mimesis-base` version).

How an agent is linked to its simulator, in order of strength (the `how` field says which):
1. the version tag `mimesis.simulator_version` is a registry URI (`models:/mimesis-simulator/3`);
2. the agent trained against a folder (`learned:models/simulator/rl`): the simulator version whose
   registering run is in the same pipeline run and belongs to the stage that writes that folder
   (dvc.lock/dvc.yaml), else the newest such version registered before the agent's run; the
   folder's md5 on the agent run is compared with the md5 dvc.lock records for that stage's output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from mimesis_rl.tracking.promotion import TAG as GATE_TAG
from mimesis_rl.tracking.promotion import recorded_metrics

INPUT_TAG = "mimesis.input."
SIMULATOR_MODEL = "mimesis-simulator"
_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/]+)|/(?P<version>\d+))$")


def parse_model_uri(uri: str) -> tuple[str, str | None, str | None]:
    """`models:/name@alias` or `models:/name/3` -> (name, alias, version)."""
    match = _URI.match(uri.strip())
    if not match:
        raise ValueError(f"{uri!r}: expected models:/<name>@<alias> or models:/<name>/<version>")
    return match["name"], match["alias"], match["version"]


def registered_version(uri: str) -> str | None:
    """`models:/name@alias` -> the version it points at, or None (no registry, no such alias); a store
    that does not exist yet is not created just to look (the panel's `member_status` asks this)."""
    if not uri.startswith("models:/") or "@" not in uri:
        return None
    try:
        import mlflow

        from mimesis_rl.config import tracking_uri

        name, alias = uri[len("models:/"):].split("@", 1)
        where = tracking_uri()
        if where.startswith("sqlite:///") and not Path(where[len("sqlite:///"):]).exists():
            return None  # no store yet: do not create one just to look
        client = mlflow.MlflowClient(tracking_uri=where)
        return str(client.get_model_version_by_alias(name, alias).version)
    except Exception:  # noqa: BLE001 - any failure to resolve means "not registered here"
        return None


def dvc_lock_index(root: str | Path | None) -> dict[str, dict[str, str]]:
    """path -> {stage, md5} for every stage output recorded in `<root>/dvc.lock` (empty if none)."""
    if root is None or not (Path(root) / "dvc.lock").exists():
        return {}
    path = Path(root) / "dvc.lock"
    try:
        lock = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from exc
    index: dict[str, dict[str, str]] = {}
    for stage, body in (lock.get("stages") or {}).items():
        for out in (body or {}).get("outs") or []:
            if isinstance(out, dict) and "path" in out:
                index[str(out["path"]).rstrip("/")] = {"stage": stage, "md5": str(out.get("md5", ""))}
    return index


def _inputs(tags: Mapping[str, str], lock: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, md5 in sorted(tags.items()):
        if not key.startswith(INPUT_TAG):
            continue
        path = key[len(INPUT_TAG):]
        entry: dict[str, Any] = {"md5": md5}
        if path in lock:
            entry["dvc_lock"] = {"stage": lock[path]["stage"], "md5": lock[path]["md5"],
                                 "matches": lock[path]["md5"] == md5}
        out[path] = entry
    return out


def _run_info(client: Any, run_id: str, lock: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    run = client.get_run(run_id)
    tags = run.data.tags
    return {"run_id": run_id, "stage": tags.get("mimesis.stage", run.info.run_name),
            "status": run.info.status, "git_commit": tags.get("mimesis.git_commit", "unknown"),
            "profile": tags.get("mimesis.profile"), "start_time": run.info.start_time,
            "parent_run_id": tags.get("mlflow.parentRunId") or tags.get("mimesis.parent_run_id"),
            "params": dict(sorted(run.data.params.items())), "inputs": _inputs(tags, lock)}


def _pipeline_runs(client: Any, run: Mapping[str, Any], lock: Mapping[str, Mapping[str, str]]) -> list[dict]:
    """The other stage runs of the same pipeline run (the upstream data stages among them)."""
    parent = run.get("parent_run_id")
    if not parent:
        return []
    experiment = client.get_run(run["run_id"]).info.experiment_id
    found = client.search_runs([experiment], filter_string=f"tags.mlflow.parentRunId = '{parent}'",
                               max_results=1000, order_by=["attributes.start_time ASC"])
    return [_run_info(client, r.info.run_id, lock) for r in found if r.info.run_id != run["run_id"]]


def _gate(tags: Mapping[str, str]) -> dict[str, Any] | None:
    if f"{GATE_TAG}.decision" not in tags:
        return None
    return {"decision": tags[f"{GATE_TAG}.decision"],
            "compared_with": tags.get(f"{GATE_TAG}.compared_with"),
            "reasons": [r for r in tags.get(f"{GATE_TAG}.reasons", "").split(" | ") if r],
            "metrics": {k: {"value": m.value, "low": m.low, "high": m.high}
                        for k, m in recorded_metrics(tags).items()}}


def _aliases(client: Any, name: str, version: str) -> list[str]:
    model = client.get_registered_model(name)
    return sorted(a for a, v in (model.aliases or {}).items() if str(v) == str(version))


def _version(client: Any, name: str, alias: str | None, version: str | None) -> Any:
    import mlflow

    try:
        if alias is not None:
            return client.get_model_version_by_alias(name, alias)
        return client.get_model_version(name, version)
    except mlflow.exceptions.MlflowException as exc:
        what = f"@{alias}" if alias is not None else f"/{version}"
        raise LookupError(f"models:/{name}{what}: not in the registry ({exc})") from exc


def _folder_producer(folder: str, root: str | Path | None,
                     lock: Mapping[str, Mapping[str, str]]) -> str | None:
    if folder in lock:
        return lock[folder]["stage"]
    dvc_yaml = Path(root) / "dvc.yaml" if root is not None else None
    if dvc_yaml is not None and dvc_yaml.exists():
        for stage, body in (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {}).items():
            if folder in [o if isinstance(o, str) else next(iter(o)) for o in (body or {}).get("outs", [])]:
                return stage
    return None


def _simulator_for(client: Any, link: Mapping[str, Any], root: str | Path | None,
                   lock: Mapping[str, Mapping[str, str]]) -> dict[str, Any] | None:
    """Which simulator version an agent version trained against (see the module doc for `how`)."""
    tags = link["tags"]
    spec = tags.get("mimesis.simulator_version") or tags.get("mimesis.trained_against")
    if not spec:
        return None
    try:
        name, alias, version = parse_model_uri(spec)
        return {"spec": spec, "model": name, "alias": alias, "version": version, "how": "registry URI tag"}
    except ValueError:
        pass
    body = spec.split(":", 1)[1] if ":" in spec else spec
    if not spec.startswith("learned:") or body.startswith("models:/"):
        return {"spec": spec, "model": None, "version": None,
                "how": "not a learned simulator (prompted/scripted user): nothing to follow"}
    folder = body.rstrip("/")
    producer = _folder_producer(folder, root, lock)
    run = link["run"]
    versions = client.search_model_versions(f"name = '{SIMULATOR_MODEL}'")
    best, how = None, ""
    for v in versions:
        if not v.run_id:
            continue
        vrun = client.get_run(v.run_id)
        stage = vrun.data.tags.get("mimesis.stage")
        if producer is not None and stage != producer:
            continue
        same = run["parent_run_id"] and vrun.data.tags.get("mlflow.parentRunId") == run["parent_run_id"]
        earlier = vrun.info.start_time <= (run["start_time"] or 0)
        rank = (2 if same else 1 if earlier else 0, int(v.version))
        if rank[0] and (best is None or rank > best[0]):
            best = (rank, v)
            how = ("same pipeline run" if same else "newest version registered before the agent's run") + \
                  (f", stage {producer} (writes {folder})" if producer else "")
    out: dict[str, Any] = {"spec": spec, "folder": folder, "producer_stage": producer,
                           "model": SIMULATOR_MODEL if best else None,
                           "version": str(best[1].version) if best else None,
                           "how": how or f"no registered {SIMULATOR_MODEL} version matches {folder}"}
    md5 = run["inputs"].get(folder, {}).get("md5")
    if md5 and folder in lock:
        out["folder_md5"] = md5
        out["dvc_lock_md5"] = lock[folder]["md5"]
        out["matches_dvc_lock"] = md5 == lock[folder]["md5"]
    return out


def lineage(uri: str, root: str | Path | None = None, client: Any = None,
            max_depth: int = 5) -> dict[str, Any]:
    """The chain behind a registry version, newest link first (see the module doc)."""
    import mlflow

    client = client or mlflow.MlflowClient()
    lock = dvc_lock_index(root)
    chain: list[dict[str, Any]] = []
    name, alias, version = parse_model_uri(uri)
    seen: set[tuple[str, str]] = set()
    while name is not None and len(chain) < max_depth:
        mv = _version(client, name, alias, version)
        key = (name, str(mv.version))
        if key in seen:
            break
        seen.add(key)
        tags = dict(mv.tags)
        link: dict[str, Any] = {
            "uri": f"models:/{name}/{mv.version}", "registered_model": name, "version": str(mv.version),
            "aliases": _aliases(client, name, str(mv.version)), "created": mv.creation_timestamp,
            "source": mv.source, "data_version": tags.get("mimesis.data_version"),
            "tags": {k: v for k, v in sorted(tags.items()) if not k.startswith(GATE_TAG)},
            "gate": _gate(tags), "run": None, "pipeline_runs": [],
        }
        if mv.run_id:
            link["run"] = _run_info(client, mv.run_id, lock)
            link["pipeline_runs"] = _pipeline_runs(client, link["run"], lock)
        chain.append(link)
        upstream = _simulator_for(client, link, root, lock) if link["run"] else None
        if upstream is not None:
            link["trained_against"] = upstream
        if upstream and upstream.get("model") and (upstream.get("version") or upstream.get("alias")):
            name, alias, version = upstream["model"], upstream.get("alias"), upstream.get("version")
            if version is not None:
                alias = None
        else:
            name = None
    return {"query": uri, "tracking_uri": mlflow.get_tracking_uri(), "dvc_lock": bool(lock), "chain": chain}


def _section_params(params: Mapping[str, str], stage: str) -> dict[str, str]:
    section = stage.split("@", 1)[0]
    own = {k: v for k, v in params.items() if k.split(".", 1)[0] in (section, "profile", "seed")}
    return own or dict(params)


def _run_lines(run: Mapping[str, Any], indent: str) -> list[str]:
    lines = [f"{indent}stage run {run['run_id']} ({run['stage']}, {run['status']}) "
             f"commit {run['git_commit']}"]
    for path, entry in run["inputs"].items():
        check = ""
        if "dvc_lock" in entry:
            d = entry["dvc_lock"]
            check = (f"  = dvc.lock {d['stage']}" if d["matches"]
                     else f"  != dvc.lock {d['stage']} {d['md5']} (an older data version)")
        lines.append(f"{indent}  input {path}: md5 {entry['md5']}{check}")
    params = _section_params(run["params"], run["stage"] or "")
    if params:
        lines.append(f"{indent}  params: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    return lines


def format_text(result: Mapping[str, Any]) -> str:
    """The chain as indented text, one block per registry version."""
    lines = [f"lineage of {result['query']} (tracking {result['tracking_uri']})"]
    for depth, link in enumerate(result["chain"]):
        pad = "  " * depth
        arrow = "" if depth == 0 else "<- trained against "
        aliases = f" @{', @'.join(link['aliases'])}" if link["aliases"] else ""
        lines.append(f"{pad}{arrow}{link['uri']}{aliases}  data {link['data_version'] or '?'}")
        base = link["tags"].get("mimesis.base_uri")
        if base:
            lines.append(f"{pad}  base: {base} (registered, not bundled)")
        gate = link["gate"]
        if gate is None:
            lines.append(f"{pad}  gate: no decision recorded")
        else:
            lines.append(f"{pad}  gate: {gate['decision']} (compared with {gate['compared_with']})")
            lines += [f"{pad}    - {r}" for r in gate["reasons"]]
        if link["run"] is None:
            lines.append(f"{pad}  no registering run recorded")
            continue
        lines += _run_lines(link["run"], pad + "  ")
        for sibling in link["pipeline_runs"]:
            lines += _run_lines(sibling, pad + "    ")
        against = link.get("trained_against")
        if against and not against.get("version"):
            lines.append(f"{pad}  trained against {against['spec']}: {against['how']}")
        elif against:
            extra = ""
            if "matches_dvc_lock" in against:
                extra = "; folder md5 " + ("= dvc.lock" if against["matches_dvc_lock"] else "!= dvc.lock")
            lines.append(f"{pad}  trained against {against['spec']} -> {against['model']}/"
                         f"{against['version']} ({against['how']}{extra})")
    return "\n".join(lines)
