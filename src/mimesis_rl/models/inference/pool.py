"""Load each base model once; every party's adapter goes onto that one base.

Why: agent and simulator are LoRA adapters over the same frozen base, so a rollout needs one copy
of the base weights in memory, not one per party. When a second party brings an adapter, the
plain base becomes a PeftModel in place; runners made earlier are pointed at the wrapper (a party
without an adapter then runs with adapters disabled).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peft import PeftModel

from mimesis_rl.models.config import PrecisionSettings
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.runner import ModelRunner
from mimesis_rl.models.inference.sources import ModelSource
from mimesis_rl.models.loading import load_base, load_tokenizer
from mimesis_rl.models.lora import load_adapters

log = logging.getLogger(__name__)


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    runners: list[ModelRunner] = field(default_factory=list)
    adapters: dict[Path, str] = field(default_factory=dict)


class ModelPool:
    """Bases by resolved folder, adapters by folder; hands out `ModelRunner`s."""

    def __init__(self, precision: PrecisionSettings | None = None) -> None:
        self.precision = precision or PrecisionSettings()
        self._bases: dict[Path, _Loaded] = {}

    def _base(self, path: Path) -> _Loaded:
        key = path.resolve()
        if key not in self._bases:
            log.info("loading base model %s", path)
            model, tokenizer = load_base(path, device=self.precision)
            self._bases[key] = _Loaded(model, tokenizer)
        return self._bases[key]

    def _adapter(self, loaded: _Loaded, adapter: Path) -> str:
        key = adapter.resolve()
        if key in loaded.adapters:
            return loaded.adapters[key]
        name = f"party{len(loaded.adapters)}"
        log.info("loading adapter %s as %r", adapter, name)
        was_peft = isinstance(loaded.model, PeftModel)
        loaded.model = load_adapters(loaded.model, {name: adapter})
        loaded.adapters[key] = name
        if not was_peft:
            for runner in loaded.runners:
                runner.model = loaded.model
        return name

    def runner(self, source: ModelSource, sampling: SamplingParams, seed: int = 0) -> ModelRunner:
        loaded = self._base(source.base)
        adapter = self._adapter(loaded, source.adapter) if source.adapter is not None else None
        tokenizer = loaded.tokenizer
        if source.tokenizer is not None and source.tokenizer.resolve() != source.base.resolve():
            tokenizer = load_tokenizer(source.tokenizer)
        runner = ModelRunner(loaded.model, tokenizer, sampling, adapter=adapter, seed=seed)
        loaded.runners.append(runner)
        return runner

    @property
    def bases(self) -> int:
        return len(self._bases)
