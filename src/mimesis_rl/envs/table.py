"""Success of the scripted agent in every domain against panel members: is each task solvable, and
where does it get hard? Used by `benchmarks/envs_table.py` (the README table) and the unit tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mimesis_rl.envs.loop import play, summarize
from mimesis_rl.envs.panel import Panel, default_panel
from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent


def success_table(
    n: int = 200,
    seed: int = 0,
    domains: Sequence[str] | None = None,
    members: Sequence[str] | None = None,
    panel: Panel | None = None,
    agent: str = "scripted",
    max_turns: int | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{domain: {member: summary}} for the scripted agent; members default to every scripted member;
    max_turns: the agent's turn budget (None: each domain's own)."""
    panel = panel or default_panel()
    names = list(members) if members is not None else [m.name for m in panel.members if m.kind == "scripted"]
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for domain in domains or list(DOMAINS):
        table[domain] = {}
        for name in names:
            states = play(
                make_env(domain, max_turns=max_turns),
                scripted_agent(domain, agent),
                panel.build(name, domain),
                list(range(seed, seed + n)),
            )
            table[domain][name] = summarize(states)
    return table


def hardest(row: dict[str, dict[str, Any]], names: Sequence[str]) -> tuple[str, float]:
    """The member with the lowest success rate in one domain's row."""
    name = min(names, key=lambda m: (row[m]["success_rate"], m))
    return name, row[name]["success_rate"]
