"""The `ema` teacher: a moving average of the trainable weights, swapped in for the teacher forward."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


class EMATeacher:
    """A moving average of the model's trainable weights, swapped in for the teacher forward."""

    def __init__(self, model: Any, rate: float) -> None:
        self.rate = rate
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("csd teacher 'ema': the model has no trainable weights to average")
        self.shadow = [p.detach().clone() for p in self.params]
        self.step: int | None = None

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Fold the current weights in once per optimiser step."""
        if self.step == step:
            return
        if self.step is not None:
            for s, p in zip(self.shadow, self.params, strict=True):
                s.lerp_(p.detach(), self.rate)
        self.step = step

    @contextmanager
    @torch.no_grad()
    def swapped(self) -> Iterator[None]:
        live = [p.detach().clone() for p in self.params]
        for p, s in zip(self.params, self.shadow, strict=True):
            p.copy_(s)
        try:
            yield
        finally:
            for p, v in zip(self.params, live, strict=True):
                p.copy_(v)
