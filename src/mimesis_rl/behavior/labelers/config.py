"""Typed settings of the `label` stage and CLI, read from the `label:` section of params.yaml."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.behavior.labelers.embedding import EmbeddingSettings
from mimesis_rl.settings import check_keys, field_names

BACKENDS = ("rules", "embedding", "llm", "ensemble")
OFFLINE = ("rules", "embedding", "ensemble")


@dataclass(frozen=True)
class LabelSettings:
    """Settings of pattern labelling.

    Data:
        input_dir / splits: `<split>.jsonl` to label; output_dir: the same files with patterns filled;
        report_dir: evaluation table, plots; model_dir: fitted labeler artifacts; max_bad_share: the
        stage fails when more than this share of conversations cannot be labelled (quarantined).
    Labelers:
        backend: rules | embedding | llm | ensemble (the one that writes the labels);
        evaluate: labelers scored on the gold test split (`llm` only when an endpoint is configured);
        gold: a gold JSONL (default: the packaged set); rules / embedding / ensemble / llm: their sections;
        weak_labels: also train on CaSiNo messages whose own strategy annotations decide `negotiation`
        or `pushback` (annotated dialogues of casino_train.json only; skipped when CaSiNo is absent);
        cross_source: also score every labeler of `evaluate` with each real gold source held out
        (trained labelers are refitted once per held-out source).
    """

    input_dir: str = "data/processed/splits"
    output_dir: str = "data/processed/labeled"
    report_dir: str = "reports/label"
    model_dir: str = "models/labeler"
    splits: tuple[str, ...] = ("train", "val", "test")
    backend: str = "ensemble"
    max_bad_share: float = 0.05
    evaluate: tuple[str, ...] = OFFLINE
    gold: str | None = None
    weak_labels: bool = True
    cross_source: bool = True
    rules: dict[str, Any] = field(default_factory=dict)
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    ensemble: dict[str, Any] = field(default_factory=lambda: {"members": ["rules", "embedding"]})
    llm: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"label.backend: unknown backend {self.backend!r}; known: {', '.join(BACKENDS)}")
        unknown = sorted(set(self.evaluate) - set(BACKENDS))
        if unknown:
            raise ValueError(f"label.evaluate: unknown labelers {unknown}; known: {', '.join(BACKENDS)}")
        members = list(self.ensemble.get("members", []))
        if not members or sorted(set(members) - {"rules", "embedding", "llm"}):
            raise ValueError(
                f"label.ensemble.members: expected a subset of rules, embedding, llm; got {members}"
            )
        mix = self.ensemble.get("mix")
        if mix is not None and (not isinstance(mix, list | tuple) or sorted(set(mix) - set(members))):
            raise ValueError(f"label.ensemble.mix: expected a subset of the members {members}; got {mix}")
        if not 0 <= self.max_bad_share <= 1:
            raise ValueError("label.max_bad_share must be within [0, 1]")

    @property
    def embedding_artifact(self) -> Path:
        return Path(self.model_dir) / "embedding.skops"

    @property
    def ensemble_artifact(self) -> Path:
        return Path(self.model_dir) / "ensemble.json"

    @property
    def rules_thresholds(self) -> float | dict[str, float]:
        value = self.rules.get("thresholds", 0.5)
        return float(value) if isinstance(value, int | float) else dict(value)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> LabelSettings:
        section = dict(params.get("label") or {})
        check_keys(section, field_names(cls), "label")
        values: dict[str, Any] = {k: v for k, v in section.items() if v is not None or k == "gold"}
        for key in ("splits", "evaluate"):
            if key in values:
                values[key] = tuple(values[key])
        values["embedding"] = EmbeddingSettings.from_section(section.get("embedding"))
        for key in ("rules", "ensemble", "llm"):
            if key in values:
                values[key] = dict(values[key] or {})
        if "ensemble" in values and "members" not in values["ensemble"]:
            values["ensemble"]["members"] = ["rules", "embedding"]
        return cls(**values)
