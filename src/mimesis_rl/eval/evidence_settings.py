"""Settings of the evidence stage (`evidence:` in params.yaml): which finished outputs it reads, which
rows and agents the claims and the issue's done-when checks compare, and the checks' thresholds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimesis_rl.settings import from_section


@dataclass(frozen=True)
class EvidenceSettings:
    """`evidence:` in params.yaml.

    Where things are:
        output_dir: claims.md, evidence.json and the curve PNGs; sim_eval / agent_eval: those stages'
        report folders; metrics: the stages' metrics files (learning curves: their `curve` lists).
    Who is compared:
        candidate / baseline: sim_eval rows of the simulator under test and the assistant baseline;
        reference: the environment part's cooperative scripted user; mimesis_agent / sft_agent:
        agent_eval names of the MIMESIS-trained agent and the warm start; mimesis_vs_assistant /
        csd_vs_rl: agent_eval's comparison names for claims 2 and 3.
    Done-when thresholds (issue 27):
        env_ratio, env_domains: the scripted agent's success against the candidate must be at least
        env_ratio of its success against the reference in at least env_domains domains;
        min_members, min_seeds: the size the agent claims must be read at (unseen members, paired
        seeds per member per domain).
    """

    output_dir: str = "reports/evidence"
    sim_eval: str = "reports/sim_eval"
    agent_eval: str = "reports/agent_eval"
    metrics: str = "metrics"
    candidate: str = "sft+rl"
    baseline: str = "assistant"
    reference: str = "reference"
    mimesis_agent: str = "rl-mimesis"
    sft_agent: str = "agent_sft"
    mimesis_vs_assistant: str = "mimesis_vs_assistant"
    csd_vs_rl: str = "csd_vs_rl"
    env_ratio: float = 0.5
    env_domains: int = 6
    min_members: int = 9
    min_seeds: int = 32

    def __post_init__(self) -> None:
        if not 0.0 < self.env_ratio <= 1.0:
            raise ValueError(f"params.yaml evidence.env_ratio must be in (0, 1], got {self.env_ratio}")
        if min(self.env_domains, self.min_members, self.min_seeds) < 1:
            raise ValueError("params.yaml evidence: env_domains, min_members and min_seeds must be >= 1")

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> EvidenceSettings:
        return from_section(cls, section, "evidence")

    @property
    def fidelity(self) -> Path:
        return Path(self.sim_eval) / "fidelity.json"

    @property
    def generalisation(self) -> Path:
        return Path(self.agent_eval) / "generalisation.json"

    @property
    def rows(self) -> Path:
        return Path(self.agent_eval) / "rows.json"

    def inputs(self) -> list[str]:
        """The report folders the stage reads (the metrics files with curves: `evidence.curve_files`)."""
        return [self.sim_eval, self.agent_eval]
