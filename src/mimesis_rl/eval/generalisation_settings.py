"""Settings of the generalisation matrix (`agent_eval:` in params.yaml): which agents, which unseen
simulators, which environments, how many paired dialogues per cell, and the statistics' knobs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mimesis_rl.settings import check_keys, field_names

METRICS = ("success", "reward")


@dataclass(frozen=True)
class AgentVariant:
    """One trained agent: `spec` is an agent spec (`scripted`, a model folder, `models:/…`)."""

    name: str
    spec: str
    trained_on: str = ""  # the training user, for the report (assistant | mimesis | none)


@dataclass(frozen=True)
class Comparison:
    """`a` minus `b` on every unseen simulator (e.g. MIMESIS-trained minus assistant-trained)."""

    name: str
    a: str
    b: str
    title: str = ""


@dataclass(frozen=True)
class GeneralisationSettings:
    """`agent_eval:` in params.yaml.

    Matrix:
        agents: the variants (name, spec, trained_on); members: unseen panel members (null = all);
        envs: environments (null = all 8); dialogues_per_cell: N dialogues per (agent, member, env),
        seeds first_seed .. first_seed+N-1 for every agent and member (paired).
        max_turns: agent-turn limit override (null = each domain's own).
    Decoding:
        agent_max_new_tokens, user_max_new_tokens (a learned user's own setting is capped by it),
        user_max_context_tokens, sampling_seed (mixed into LM sampling seeds), batch_dialogues
        (dialogues played in one lockstep rollout: bounds the KV caches held at once).
    Statistics:
        bootstrap: resamples; confidence: interval level; metric: what the comparisons rank
        (success | reward).
    Missing inputs:
        on_missing: `skip` (recorded in the report, the claims say "not measured") or `fail`.
    Transcripts:
        write_transcripts: one JSONL per agent, each dialogue with its coach notes (`eval.coach_notes`;
        coach_horizon: later user turns the template coach reads for a note), for the report.
    """

    agents: tuple[AgentVariant, ...] = ()
    members: tuple[str, ...] | None = None
    envs: tuple[str, ...] | None = None
    dialogues_per_cell: int = 4
    first_seed: int = 10_000
    max_turns: int | None = None
    agent_max_new_tokens: int = 96
    user_max_new_tokens: int = 64
    user_max_context_tokens: int | None = 512
    sampling_seed: int = 0
    bootstrap: int = 2000
    confidence: float = 0.95
    metric: str = "success"
    on_missing: str = "skip"
    base_model: str = "models/base"
    report_dir: str = "reports/agent_eval"
    comparisons: tuple[Comparison, ...] = ()
    write_transcripts: bool = True
    coach_horizon: int = 2
    batch_dialogues: int | None = 48

    def __post_init__(self) -> None:
        if self.dialogues_per_cell < 1:
            raise ValueError(f"agent_eval.dialogues_per_cell must be >= 1, got {self.dialogues_per_cell}")
        if self.metric not in METRICS:
            raise ValueError(f"agent_eval.metric: {self.metric!r} is not one of {METRICS}")
        if self.on_missing not in ("skip", "fail"):
            raise ValueError(f"agent_eval.on_missing: {self.on_missing!r} is not skip or fail")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"agent_eval.confidence must be in [0.5, 1), got {self.confidence}")
        if self.coach_horizon < 1:
            raise ValueError(f"agent_eval.coach_horizon must be >= 1, got {self.coach_horizon}")
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names):
            raise ValueError(f"agent_eval.agents: duplicate names in {names}")

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> GeneralisationSettings:
        section = dict(section or {})
        check_keys(section, field_names(cls), "agent_eval")
        agents = []
        for i, entry in enumerate(section.pop("agents", None) or []):
            if not isinstance(entry, Mapping) or "name" not in entry or "spec" not in entry:
                raise ValueError(f"params.yaml agent_eval.agents[{i}]: needs `name` and `spec`, "
                                 f"got {entry!r}")
            agents.append(AgentVariant(str(entry["name"]), str(entry["spec"]),
                                       str(entry.get("trained_on", ""))))
        comparisons = []
        for name, entry in (section.pop("comparisons", None) or {}).items():
            if not isinstance(entry, Mapping) or "a" not in entry or "b" not in entry:
                raise ValueError(f"params.yaml agent_eval.comparisons.{name}: needs `a` and `b`, "
                                 f"got {entry!r}")
            comparisons.append(Comparison(str(name), str(entry["a"]), str(entry["b"]),
                                          str(entry.get("title", ""))))
        for key in ("members", "envs"):
            if section.get(key) is not None:
                section[key] = tuple(section[key])
        return cls(agents=tuple(agents), comparisons=tuple(comparisons), **section)


def cell_seeds(settings: GeneralisationSettings) -> list[int]:
    """The seeds of every cell: the same for every agent, member and environment (paired)."""
    return list(range(settings.first_seed, settings.first_seed + settings.dialogues_per_cell))
