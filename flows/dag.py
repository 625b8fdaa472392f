"""The stage graph, read by DVC itself from dvc.yaml: DVC owns the DAG, the flows only follow it.

DVC's index resolves `foreach`/`matrix` stages and `${…}` templating, so an expanded stage such as
`agent_rl@mimesis` is a node like any other, named as `dvc repro --single-item` expects it.
"""

from __future__ import annotations

from pathlib import Path


def stage_graph(dvc_yaml: str | Path = "dvc.yaml") -> dict[str, set[str]]:
    """stage -> the stages whose outputs it depends on, in dvc.yaml's order."""
    from dvc.repo import Repo

    path = Path(dvc_yaml).resolve()
    with Repo(str(path.parent)) as repo:
        index = repo.index
        stages = [s for s in index.stages if Path(s.path).resolve() == path]
        names = {s: s.name for s in stages}
        return {names[s]: {names[d] for d in index.graph.successors(s) if d in names} for s in stages}


def stage_order(dvc_yaml: str | Path = "dvc.yaml", until: str | None = None) -> list[str]:
    """Stages in dependency order (ties keep dvc.yaml's order); with `until`, only it and its ancestors.

    `until` may name a whole `foreach`/`matrix` group (`agent_rl`): every expansion of it is kept.
    """
    graph = stage_graph(dvc_yaml)
    if until is not None:
        targets = [n for n in graph if n == until or n.split("@", 1)[0] == until]
        if not targets:
            raise ValueError(f"unknown stage {until!r}; stages in dvc.yaml: {', '.join(graph)}")
        keep, todo = set(), list(targets)
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
