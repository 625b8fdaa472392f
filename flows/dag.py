"""The stage graph, read from dvc.yaml: DVC owns the DAG, the flows only follow it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def _paths(entries: list[Any] | None) -> list[str]:
    """dvc.yaml lists entries as plain strings or one-key dicts ({path: {cache: false}})."""
    out: list[str] = []
    for entry in entries or []:
        out.extend([entry] if isinstance(entry, str) else list(entry))
    return [p.rstrip("/") for p in out]


def _produces(out: str, dep: str) -> bool:
    return dep == out or dep.startswith(out + "/") or out.startswith(dep + "/")


def stage_graph(dvc_yaml: str | Path = "dvc.yaml") -> dict[str, set[str]]:
    """stage -> the stages whose outputs it depends on."""
    stages: dict[str, dict[str, Any]] = (yaml.safe_load(Path(dvc_yaml).read_text()) or {}).get("stages", {})
    outputs = {name: _paths(spec.get("outs")) + _paths(spec.get("metrics")) + _paths(spec.get("plots"))
               for name, spec in stages.items()}
    graph: dict[str, set[str]] = {}
    for name, spec in stages.items():
        deps = _paths(spec.get("deps"))
        graph[name] = {other for other, outs in outputs.items() if other != name
                       and any(_produces(o, d) for o in outs for d in deps)}
    return graph


def stage_order(dvc_yaml: str | Path = "dvc.yaml", until: str | None = None) -> list[str]:
    """Stages in dependency order (ties keep dvc.yaml's order); with `until`, only it and its ancestors."""
    graph = stage_graph(dvc_yaml)
    if until is not None:
        if until not in graph:
            raise ValueError(f"unknown stage {until!r}; stages in dvc.yaml: {', '.join(graph)}")
        keep, todo = set(), [until]
        while todo:
            name = todo.pop()
            if name not in keep:
                keep.add(name)
                todo.extend(graph[name])
        graph = {name: deps for name, deps in graph.items() if name in keep}
    order: list[str] = []
    while len(order) < len(graph):
        ready = [name for name in graph if name not in order and graph[name] <= set(order)]
        if not ready:
            raise ValueError(f"dvc.yaml has a dependency cycle among {sorted(set(graph) - set(order))}")
        order.append(ready[0])
    return order
