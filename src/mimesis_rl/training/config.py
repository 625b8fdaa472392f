"""Stage settings from params.yaml with TRL's own config fields passed through (the TRL way).

    sim_sft:                      # params.yaml: our knobs at the top ...
      window_turns: 6
      trainer:                    # ... TRL's `SFTConfig` / `GRPOConfig` fields as they are
        max_steps: 50
        learning_rate: 2.0e-4

A TRL field may also sit at the top level (`max_steps: 50`, as the agent sections write them), and
`batch_size` / `grad_accum` are short for `per_device_train_batch_size` / `gradient_accumulation_steps`.
A key that is a field of the stage's own settings class stays the stage's (`output_dir`, `bf16`, ...).
Fields every stage owns (output_dir, seed, precision, DeepSpeed, report_to) and those one stage sets
itself (`TRAINER_OWNED`, e.g. agent_sft's `assistant_only_loss`) are refused with an error naming
the key; unknown TRL fields are refused naming the config class.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch

from mimesis_rl.models.config import PrecisionSettings
from mimesis_rl.models.precision import device_and_dtype, trainer_precision_kwargs
from mimesis_rl.settings import did_you_mean, from_section
from mimesis_rl.tracking.registration import RegistrySettings
from mimesis_rl.training.launch import LAUNCHERS

T = TypeVar("T")
_S = TypeVar("_S", bound="TrainingSettings")
ALIASES = {"batch_size": "per_device_train_batch_size", "grad_accum": "gradient_accumulation_steps"}
STAGE_OWNED = ("output_dir", "seed", "data_seed", "report_to", "deepspeed", "use_cpu", "bf16", "fp16")
# A top-level `seed` is the run's (params.yaml `seed`), never a TRL option.
_NEVER_LIFTED = frozenset({"seed"})


def precision_kwargs(device: str = "auto", bf16: str | bool = "auto") -> dict[str, Any]:
    """`use_cpu`/`bf16`/`fp16` for the one device switch; `bf16` true/false overrides `auto`."""
    resolved_device, dtype = device_and_dtype(PrecisionSettings(device=device))
    kwargs = trainer_precision_kwargs(resolved_device, dtype)
    if bf16 is True or bf16 == "true":
        kwargs.update(bf16=True, fp16=False)
    elif bf16 is False or bf16 == "false":
        kwargs.update(bf16=False)
    return kwargs


def resolve_bf16(params: Mapping[str, Any], section: Mapping[str, Any]) -> bool:
    """A stage's `bf16: auto` made concrete from params.yaml `models` (cpu_dtype / cuda_dtype)."""
    value = section.get("bf16", "auto")
    if value in (True, "true"):
        return True
    if value in (False, "false"):
        return False
    models = PrecisionSettings.from_params(params)
    config = PrecisionSettings(device=str(section.get("device", "auto")), cpu_dtype=models.cpu_dtype,
                             cuda_dtype=models.cuda_dtype)
    _, dtype = device_and_dtype(config)
    return dtype == torch.bfloat16


def stage_section(params: Mapping[str, Any], stage: str) -> tuple[dict[str, Any], RegistrySettings]:
    """(the stage's params section with `bf16: auto` made concrete, its `registry:` block)."""
    section = dict(params.get(stage) or {})
    registry = RegistrySettings.from_section(section.pop("registry", None), f"{stage}.registry")
    section["bf16"] = resolve_bf16(params, section)
    return section, registry


def deepspeed_path(config: str | None, root: str | Path = ".") -> str | None:
    """The DeepSpeed JSON to hand to `TrainingArguments(deepspeed=...)`, checked to exist and parse."""
    if not config:
        return None
    path = Path(config) if Path(config).is_absolute() else Path(root) / config
    if not path.is_file():
        raise FileNotFoundError(f"deepspeed config {config}: file not found")
    json.loads(path.read_text())
    return str(path)


def trl_config_class(name: str) -> type:
    """TRL's config class by name (`SFTConfig`, `GRPOConfig`), imported only when needed."""
    return getattr(importlib.import_module("trl"), name)


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """What every training stage has besides its data.

    trainer: options for TRL's config class (`TRL_CONFIG`), passed through as they are, over the
        stage's `TRAINER_DEFAULTS`.
    Hardware: device (auto | cpu | cuda), bf16 (auto | true | false), deepspeed (a JSON under
        infra/deepspeed or null), launcher (`python`: in process; `accelerate`: `accelerate launch`
        with accelerate_config).
    Output: output_dir (the model folder, a DVC output), checkpoint_dir (outside DVC; resumable),
        keep_checkpoints.

    A stage's subclass names its TRL config class, its defaults and the TRL fields it sets itself.
    """

    TRL_CONFIG: ClassVar[str] = "SFTConfig"
    TRAINER_DEFAULTS: ClassVar[Mapping[str, Any]] = {}
    TRAINER_OWNED: ClassVar[tuple[str, ...]] = ()

    trainer: dict[str, Any] = dataclasses.field(default_factory=dict)
    device: str = "auto"
    bf16: str | bool = "auto"
    deepspeed: str | None = None
    launcher: str = "python"
    accelerate_config: str | None = None
    output_dir: str = "models/simulator"
    checkpoint_dir: str = "checkpoints/simulator"
    keep_checkpoints: bool = False

    def __post_init__(self) -> None:
        # built in code (tests, benchmarks) or from params.yaml, a stage starts from the same defaults
        object.__setattr__(self, "trainer", {**self.TRAINER_DEFAULTS, **self.trainer})
        if self.launcher not in LAUNCHERS:
            raise ValueError(f"launcher: {self.launcher!r} is not one of {LAUNCHERS}")

    def option(self, name: str, default: Any = None) -> Any:
        """A trainer option (after defaults; `batch_size` / `grad_accum` name their TRL fields)."""
        return self.trainer.get(ALIASES.get(name, name), default)

    @property
    def max_steps(self) -> int:
        return int(self.trainer.get("max_steps", -1))

    def with_options(self: _S, **options: Any) -> _S:
        """A copy with these TRL options (aliases allowed) laid over the current ones (benchmarks, tests)."""
        return dataclasses.replace(self, trainer={**self.trainer,  # type: ignore[arg-type]
                                                  **{ALIASES.get(k, k): v for k, v in options.items()}})

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def trainer_options(section: dict[str, Any], cls: type[TrainingSettings], where: str) -> dict[str, Any]:
    """Pop the trainer options out of a params section (mutates it): its `trainer:` sub-dict, then any
    top-level key that is a field of the TRL config (or an alias) and not one of the stage's own
    settings; `TrainingSettings` lays them over the stage's defaults. Unknown keys in `trainer:` and the
    fields the stage sets itself are errors naming the section and the key."""
    fields = {f.name for f in dataclasses.fields(trl_config_class(cls.TRL_CONFIG))}
    own = {f.name for f in dataclasses.fields(cls)} | _NEVER_LIFTED
    nested = dict(section.pop("trainer", None) or {})
    lifted = {}
    for key in list(section):
        name = ALIASES.get(key, key)
        if name in fields and key not in own:
            lifted[name] = section.pop(key)
    nested = {ALIASES.get(k, k): v for k, v in nested.items()}
    unknown = sorted(set(nested) - fields)
    if unknown:
        raise ValueError("; ".join(f"params.yaml: {where}.trainer.{k}: unknown key (not a TRL "
                                   f"{cls.TRL_CONFIG} field){did_you_mean(k, fields)}" for k in unknown))
    owned = sorted(set(nested) & set(STAGE_OWNED))
    if owned:
        raise ValueError(f"params.yaml `{where}.trainer`: {owned} are set by the stage (use the stage's own "
                         "keys: output_dir, device, bf16, deepspeed)")
    mine = sorted((set(nested) | set(lifted)) & set(cls.TRAINER_OWNED))
    if mine:
        raise ValueError(f"params.yaml `{where}`: {mine} are set by the stage itself (it needs them so); "
                         "leave them out")
    return {**nested, **lifted}


def parse_settings(cls: type[T], section: Mapping[str, Any] | None, where: str, **nested: Any) -> T:
    """`cls` (a TrainingSettings) from a params section whose TRL options are passed through (see
    `trainer_options`); `nested` are the sub-blocks the stage built itself."""
    section = dict(section or {})
    trainer = trainer_options(section, cls, where)  # type: ignore[arg-type]
    return from_section(cls, section, where, trainer=trainer, **nested)


def trainer_config(settings: TrainingSettings, output_dir: str | Path, seed: int, where: str,
                   **fixed: Any) -> Any:
    """The stage's TRL config: `TRL_CONFIG(**settings.trainer)` with what the stage owns: output folder,
    seeds, precision, DeepSpeed, no reporting (MLflow is written by `MlflowMetricsCallback`), and
    `fixed`: what the stage sets itself (`TRAINER_OWNED` keeps those fields out of params.yaml)."""
    config_cls = trl_config_class(settings.TRL_CONFIG)
    kwargs = {**settings.trainer, **fixed}
    kwargs.update(output_dir=str(output_dir), seed=seed, data_seed=seed, report_to="none",
                  deepspeed=deepspeed_path(settings.deepspeed),
                  **precision_kwargs(settings.device, settings.bf16))
    try:
        return config_cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"params.yaml `{where}`: {settings.TRL_CONFIG} refused the trainer options: "
                         f"{exc}") from exc
