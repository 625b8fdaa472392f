"""How a party decodes (`SamplingParams`): plain settings, no torch.

Why its own module: a model folder's manifest (`models.artifact`) stores these settings as JSON, and
reading a manifest must not import torch or the decoding loop that uses them
(`models.inference.generation`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from mimesis_rl.settings import from_section


@dataclass(frozen=True)
class SamplingParams:
    """How one side decodes.

    Decoding:
        do_sample: False = greedy (argmax), True = sample from softmax(logits / temperature).
        temperature, top_k, top_p: the usual warpers (top_k 0 and top_p 1.0 switch them off).
    Length:
        max_new_tokens: cap per turn; a turn that hits it without a stop token is `truncated`.
    Retries:
        max_retries: a party with a turn format (the simulator) re-samples an output its parser
            rejects up to this many times, each with a fresh seed; free-text parties ignore it.
        retry_temperature_step: added to the temperature at each re-sample. A fresh seed at the
            same temperature mostly redraws the mode that failed (a small model stuck repeating
            itself); a hotter re-sample leaves it more often. First samples are unchanged.
    """

    max_new_tokens: int = 64
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    max_retries: int = 0
    retry_temperature_step: float = 0.0

    def for_attempt(self, attempt: int) -> SamplingParams:
        """The settings of the `attempt`-th sample of a turn (0 = the first)."""
        if not attempt or not self.retry_temperature_step or not self.do_sample:
            return self
        return replace(self, temperature=self.temperature + attempt * self.retry_temperature_step)

    @classmethod
    def from_dict(cls, data: dict | None, where: str = "generation",
                  path: str | Path = "mimesis.json") -> SamplingParams:
        """From a manifest's `generation` (or a params block); unknown keys are an error naming them."""
        return from_section(cls, data, where, path)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature <= 0:
            raise ValueError(
                f"temperature must be > 0, got {self.temperature} (use do_sample=False for greedy)"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.retry_temperature_step < 0:
            raise ValueError(f"retry_temperature_step must be >= 0, got {self.retry_temperature_step}")
