"""`ServeSettings` <- params.yaml `serve:` (the CLI's options override it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServeSettings:
    """Knobs of the HTTP API.

    model: what is served, as given (a folder, an MLflow URI, or `assistant`); shown by /v1/info.
    base_model: base for `assistant` and for adapters that do not bundle their base.
    batch_window_ms: after the first waiting request, how long the server waits for others to join
        the same batched simulator call. Larger = bigger batches (throughput), smaller = lower latency
        for a lone client; 0 batches only what is already queued.
    max_batch: a batch is sent at once when this many requests are waiting.
    max_sessions: beyond this many open sessions the least recently used one is dropped.
    session_ttl_s: a session idle this long is dropped; either way the client then gets a 404.
    expose_reasoning: include the user's private reasoning in replies and transcripts (analysis
        only: an agent under training or evaluation must never see it).
    """

    model: str = "models:/mimesis-simulator@candidate"
    base_model: str = "models/base"
    batch_window_ms: float = 10.0
    max_batch: int = 16
    max_sessions: int = 1000
    session_ttl_s: float = 3600.0
    expose_reasoning: bool = False

    def __post_init__(self) -> None:
        if self.batch_window_ms < 0:
            raise ValueError(f"serve.batch_window_ms must be >= 0, got {self.batch_window_ms}")
        for name in ("max_batch", "max_sessions"):
            if getattr(self, name) < 1:
                raise ValueError(f"serve.{name} must be >= 1, got {getattr(self, name)}")
        if self.session_ttl_s <= 0:
            raise ValueError(f"serve.session_ttl_s must be > 0, got {self.session_ttl_s}")

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None, **overrides: Any) -> ServeSettings:
        """From params.yaml `serve:`; unknown keys are an error; `None` overrides are ignored."""
        values = dict(section or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"params.yaml `serve`: unknown key(s) {unknown}; known: {sorted(known)}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
