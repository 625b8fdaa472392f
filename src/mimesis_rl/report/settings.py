"""The `report` section of params.yaml: where each stage's outputs are, and how the page reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimesis_rl.settings import from_section


@dataclass(frozen=True)
class ReportSettings:
    """The `report` section of params.yaml.

    output: path stem of the report (`.html` and `.md` are written beside each other).
    validation / label / sim_eval / agent_eval / promote: where each stage's outputs are.
    metrics: the stages' metrics files (training stages' learning curves: the curves section).
    dialogues: sample dialogues shown (their coach notes are written by the stage that played them).
    images: `embed` (base64 PNG in the HTML) or `link` (relative paths; the Markdown always links).
    max_chars: long messages are cut for reading (the transcripts keep them whole).
    """

    output: str = "reports/mimesis_report"
    validation: str = "reports/validation/summary.json"
    label: str = "reports/label/distribution.json"
    sim_eval: str = "reports/sim_eval"
    agent_eval: str = "reports/agent_eval"
    promote: str = "reports/promote/decision.json"
    metrics: str = "metrics"
    dialogues: int = 3
    images: str = "embed"
    max_chars: int = 600
    title: str = "MIMESIS report"

    def __post_init__(self) -> None:
        if self.images not in ("embed", "link"):
            raise ValueError(f"params.yaml report.images: {self.images!r}; use `embed` or `link`")
        if self.dialogues < 0 or self.max_chars < 40:
            raise ValueError("params.yaml report: dialogues must be >= 0, max_chars >= 40")

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> ReportSettings:
        return from_section(cls, section, "report")

    @property
    def html_path(self) -> Path:
        return Path(f"{self.output}.html")

    @property
    def md_path(self) -> Path:
        return Path(f"{self.output}.md")

    def inputs(self) -> list[str]:
        """Every file or folder the report reads (for lineage tags and the DVC stage)."""
        return [self.validation, self.label, self.sim_eval, self.agent_eval, self.promote]
