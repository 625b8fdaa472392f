"""`CSDSettings`: the `agent_rl.csd` block of params.yaml, checked when it is read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.agent.coach.base import COACHES
from mimesis_rl.settings import from_section


@dataclass(frozen=True)
class CSDSettings:
    """`agent_rl.csd` in params.yaml.

    enabled: CSD on; lam: λ, the weight of the per-token reverse KL (0 = plain RL, nothing computed).
    form: `advantage` (per-token advantage term, default) or `loss` (added loss term).
    teacher: `live` (the current policy) or `ema` (moving average of the trainable weights, `ema_rate`).
    coach: `template`, `model` or `llm`; coach_options: that backend's keyword options (an `llm`
        endpoint: base_url_env/model_env/api_key_env or literal base_url/model, timeout_s, …).
    horizon: how many following user turns a note may read.
    shuffle: the control: notes from another dialogue of the batch (another episode seed).
    redact: replace private slot values written verbatim in a note by their label (the leak guard).
    note_role, note_prefix: how a note is rendered as a chat message; max_note_tokens: notes are cut
        to fit; max_teacher_tokens: a teacher sequence longer than this (or the model's context) is
        skipped (counted in `csd/rows_skipped`).
    teacher_batch_size: rows per teacher forward.
    """

    enabled: bool = False
    lam: float = 0.05
    form: str = "advantage"
    teacher: str = "live"
    ema_rate: float = 0.1
    coach: str = "template"
    coach_options: dict[str, Any] = field(default_factory=dict)
    horizon: int = 2
    shuffle: bool = False
    redact: bool = True
    note_role: str = "system"
    note_prefix: str = "Coach note: "
    max_note_tokens: int = 72
    max_teacher_tokens: int | None = None
    teacher_batch_size: int = 4

    def __post_init__(self) -> None:
        where = "agent_rl.csd"
        if self.lam < 0:
            raise ValueError(f"{where}.lam must be >= 0, got {self.lam}")
        if self.form not in ("advantage", "loss"):
            raise ValueError(f"{where}.form must be 'advantage' or 'loss', got {self.form!r}")
        if self.teacher not in ("live", "ema"):
            raise ValueError(f"{where}.teacher must be 'live' or 'ema', got {self.teacher!r}")
        if not 0.0 < self.ema_rate <= 1.0:
            raise ValueError(f"{where}.ema_rate must be in (0, 1], got {self.ema_rate}")
        if self.coach not in COACHES:
            raise ValueError(f"{where}.coach must be one of {COACHES}, got {self.coach!r}")
        if self.horizon < 1 or self.max_note_tokens < 8 or self.teacher_batch_size < 1:
            raise ValueError(f"{where}: horizon >= 1, max_note_tokens >= 8, teacher_batch_size >= 1")

    @property
    def active(self) -> bool:
        return self.enabled and self.lam > 0

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None, where: str = "agent_rl.csd") -> CSDSettings:
        section = dict(section or {})
        if "lambda" in section:
            section["lam"] = section.pop("lambda")
        return from_section(cls, section, where)
