"""The skeleton SFT and RL share: typed settings from params.yaml with the TRL trainer options as a
sub-dict, the trainer config built from them, checkpoints and resuming, saving and registering the
simulator folder, MLflow metrics while training, and the `accelerate launch` worker entry.

    sim_sft:                      # params.yaml: our knobs at the top ...
      window_turns: 6
      trainer:                    # ... TRL's `SFTConfig` / `GRPOConfig` fields as they are (the TRL way)
        max_steps: 50
        learning_rate: 2.0e-4

A TRL field may also sit at the top level (`max_steps: 50`), and `batch_size` / `grad_accum` are
short for `per_device_train_batch_size` / `gradient_accumulation_steps`. Fields the stage owns
(output_dir, seed, precision, DeepSpeed, report_to) are set here and refused in `trainer:`.

Checkpoints live outside the stage's DVC outputs (DVC deletes outputs before a stage reruns) in a
folder named after a fingerprint of the settings and data, so an interrupted run resumes and a run
with other settings never picks up a stale checkpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

import mlflow
import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from mimesis_rl.models.config import PrecisionConfig
from mimesis_rl.models.precision import device_and_dtype, trainer_precision_kwargs

log = logging.getLogger(__name__)
T = TypeVar("T")
RUN_ID_ENV = "MIMESIS_TRAIN_RUN_ID"  # the stage run that launched workers log into
ALIASES = {"batch_size": "per_device_train_batch_size", "grad_accum": "gradient_accumulation_steps"}
STAGE_OWNED = ("output_dir", "seed", "data_seed", "report_to", "deepspeed", "use_cpu", "bf16", "fp16")
LAUNCHERS = ("python", "accelerate")


def build_settings(cls: type[T], section: Mapping[str, Any] | None, where: str, **nested: Any) -> T:
    """cls(**section); unknown keys are an error naming the params.yaml section."""
    section = dict(section or {})
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(f"params.yaml `{where}`: unknown key(s) {unknown}; known: {sorted(known)}")
    return cls(**{**section, **nested})


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (settings, data hashes)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def latest_checkpoint(folder: str | Path) -> str | None:
    """The newest `checkpoint-N` under `folder` (None when there is none): what to resume from."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    return get_last_checkpoint(str(folder))


def precision_kwargs(device: str = "auto", bf16: str | bool = "auto") -> dict[str, Any]:
    """`use_cpu`/`bf16`/`fp16` for the one device switch; `bf16` true/false overrides `auto`."""
    resolved_device, dtype = device_and_dtype(PrecisionConfig(device=device))
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
    models = PrecisionConfig.from_params(params)
    config = PrecisionConfig(device=str(section.get("device", "auto")), cpu_dtype=models.cpu_dtype,
                             cuda_dtype=models.cuda_dtype)
    _, dtype = device_and_dtype(config)
    return dtype == torch.bfloat16


def deepspeed_path(config: str | None, root: str | Path = ".") -> str | None:
    """The DeepSpeed JSON to hand to `TrainingArguments(deepspeed=...)`, checked to exist and parse."""
    if not config:
        return None
    path = Path(config) if Path(config).is_absolute() else Path(root) / config
    if not path.is_file():
        raise FileNotFoundError(f"deepspeed config {config}: file not found")
    json.loads(path.read_text())
    return str(path)


class DropEmptyParamGroups:
    """Trainer mixin: no empty optimizer parameter groups.

    With LoRA every trainable weight decays, so HF's "no decay" group is empty. DeepSpeed's engine
    removes empty groups from the optimizer after HF built its LR scheduler on two groups, and
    torch >= 2.13 then fails in `LRScheduler.step` (`zip(..., strict=True)`). Dropping the empty
    group before the scheduler exists keeps both in agreement, with or without DeepSpeed.
    """

    def create_optimizer(self, *args: Any, **kwargs: Any) -> Any:
        optimizer = super().create_optimizer(*args, **kwargs)  # type: ignore[misc]
        optimizer.param_groups[:] = [g for g in optimizer.param_groups if g["params"]]
        return optimizer


class MlflowMetricsCallback(TrainerCallback):
    """Logs the trainer's numbers into the *current* stage run while training.

    HF's own MLflow integration starts its own run when it sees none (and logs every argument);
    this one only writes metrics, only from the main process, into the active run or the run
    named by $MIMESIS_TRAIN_RUN_ID (set for `accelerate launch` workers).
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        active = mlflow.active_run()
        self.run_id = active.info.run_id if active else os.environ.get(RUN_ID_ENV)

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not self.run_id or not logs:
            return
        metrics = {f"{self.prefix}.{k}".replace("/", "."): float(v) for k, v in logs.items()
                   if isinstance(v, int | float) and not isinstance(v, bool)}
        if metrics:
            try:
                mlflow.MlflowClient().log_batch(
                    self.run_id, metrics=[mlflow.entities.Metric(k, v, int(_now_ms()), state.global_step)
                                          for k, v in metrics.items()])
            except mlflow.exceptions.MlflowException as exc:  # never kill training over telemetry
                log.warning("could not log metrics to MLflow: %s", exc)


def _now_ms() -> float:
    import time

    return time.time() * 1000


def launch_worker(module: str, payload: Mapping[str, Any], accelerate_config: str | None,
                  root: str | Path = ".") -> dict[str, Any]:
    """Run `module` under `accelerate launch` (multi-GPU / multi-node) and return its result JSON.

    The calling stage keeps its MLflow run; workers log metrics into it through $MIMESIS_TRAIN_RUN_ID.
    """
    import subprocess
    import sys
    import tempfile

    if not accelerate_config:
        raise ValueError("launcher `accelerate` needs accelerate_config (a file under infra/accelerate)")
    config = Path(root) / accelerate_config  # an absolute path stays absolute
    if not config.is_file():
        raise FileNotFoundError(f"accelerate config {accelerate_config}: file not found")
    env = dict(os.environ)
    active = mlflow.active_run()
    if active is not None:
        env[RUN_ID_ENV] = active.info.run_id
    with tempfile.TemporaryDirectory(prefix="mimesis-launch-") as tmp:
        payload_path, result_path = Path(tmp) / "payload.json", Path(tmp) / "result.json"
        payload_path.write_text(json.dumps(payload, default=str))
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config), "-m", module,
               str(payload_path), str(result_path)]
        log.info("launching: %s", " ".join(cmd))
        subprocess.run(cmd, check=True, env=env, cwd=root)
        return json.loads(result_path.read_text())


# ----------------------------------------------------------------------------------------------
# The shared skeleton
# ----------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """What every simulator training stage has besides its data (fields shared by SFT and RL).

    trainer: options for TRL's config class (`SFTConfig` / `GRPOConfig`), passed through as they are.
    Hardware: device (auto | cpu | cuda), bf16 (auto | true | false), deepspeed (a JSON under
        infra/deepspeed or null), launcher (`python`: in process; `accelerate`: `accelerate launch`
        with accelerate_config).
    Output: output_dir (the simulator folder, a DVC output), checkpoint_dir (outside DVC;
        resumable), keep_checkpoints.
    """

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
        if self.launcher not in LAUNCHERS:
            raise ValueError(f"launcher: {self.launcher!r} is not one of {LAUNCHERS}")

    def option(self, name: str, default: Any = None) -> Any:
        """A trainer option (after defaults)."""
        return self.trainer.get(name, default)

    @property
    def max_steps(self) -> int:
        return int(self.trainer.get("max_steps", -1))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def trainer_options(section: dict[str, Any], config_cls: type, defaults: Mapping[str, Any],
                    where: str) -> dict[str, Any]:
    """Pop the trainer options out of a params section (mutates it): `defaults`, then its `trainer:`
    sub-dict, then any top-level key that is a field of `config_cls` (or an alias). Unknown keys in
    `trainer:` and the fields the stage sets itself are errors naming the section."""
    fields = {f.name for f in dataclasses.fields(config_cls)}
    nested = dict(section.pop("trainer", None) or {})
    lifted = {}
    for key in list(section):
        name = ALIASES.get(key, key)
        if name in fields and key not in _OWN_KEYS:
            lifted[name] = section.pop(key)
    nested = {ALIASES.get(k, k): v for k, v in nested.items()}
    unknown = sorted(set(nested) - fields)
    if unknown:
        raise ValueError(f"params.yaml `{where}.trainer`: unknown {config_cls.__name__} field(s) {unknown}")
    owned = sorted(set(nested) & set(STAGE_OWNED))
    if owned:
        raise ValueError(f"params.yaml `{where}.trainer`: {owned} are set by the stage (use the stage's own "
                         "keys: output_dir, device, bf16, deepspeed)")
    return {**defaults, **nested, **lifted}


# Keys of our own settings that share a name with a TRL field but mean the stage's own thing.
_OWN_KEYS = frozenset({"output_dir", "bf16", "deepspeed", "seed"})


def parse_settings(cls: type[T], section: Mapping[str, Any] | None, where: str, config_cls: type,
                   defaults: Mapping[str, Any], **nested: Any) -> T:
    """`cls` from a params section whose TRL options are passed through (see `trainer_options`)."""
    section = dict(section or {})
    trainer = trainer_options(section, config_cls, defaults, where)
    return build_settings(cls, section, where, trainer=trainer, **nested)


def trainer_config(config_cls: type, settings: TrainingSettings, output_dir: str | Path, seed: int,
                   where: str, **fixed: Any) -> Any:
    """`config_cls(**settings.trainer)` with what the stage owns: output folder, seeds, precision,
    DeepSpeed, no reporting (MLflow is written by `MlflowMetricsCallback`). `fixed` wins over options."""
    kwargs = {**settings.trainer, **fixed}
    kwargs.update(output_dir=str(output_dir), seed=seed, data_seed=seed, report_to="none",
                  deepspeed=deepspeed_path(settings.deepspeed),
                  **precision_kwargs(settings.device, settings.bf16))
    try:
        return config_cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"params.yaml `{where}`: {config_cls.__name__} refused the trainer options: "
                         f"{exc}") from exc


def with_clean_param_groups(trainer_cls: type) -> type:
    """`trainer_cls` with `DropEmptyParamGroups` mixed in (the one change both trainers need)."""
    return type(f"Simulator{trainer_cls.__name__}", (DropEmptyParamGroups, trainer_cls),
                {"__doc__": f"TRL's {trainer_cls.__name__}; empty optimizer parameter groups dropped."})


class Resumable(Protocol):
    """What checkpointing needs of a stage's settings (the simulator's and the agents' trainers)."""

    checkpoint_dir: str
    keep_checkpoints: bool

    def to_json(self) -> dict[str, Any]: ...


def checkpoint_folder(settings: Resumable, seed: int, data_hash: str) -> tuple[Path, str | None]:
    """(this run's checkpoint folder, the checkpoint to resume from or None).

    The folder is keyed by the settings, seed and data: a run with other settings starts afresh
    instead of resuming a checkpoint that is not its own. How the run is launched is not part of the
    key (see `run_identity`): a checkpoint written by `accelerate launch` on 2 processes resumes in one
    process with the same global batch, and the other way round."""
    folder = Path(settings.checkpoint_dir) / fingerprint(run_identity(settings.to_json()), seed, data_hash)
    resume = latest_checkpoint(folder)
    if resume:
        log.info("resuming from %s", resume)
    return folder, resume


def world_size() -> int:
    """Processes in this run (`WORLD_SIZE`, set by torchrun/accelerate for each worker; 1 alone)."""
    return max(1, int(os.environ.get("WORLD_SIZE", "1") or 1))


def run_identity(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that decide what a run computes: without the launcher and its config, and with
    the per-process batch as the global batch (per device x processes), which is what the optimizer
    sees."""
    out = {k: v for k, v in settings.items() if k not in ("launcher", "accelerate_config")}
    trainer = dict(out.get("trainer") or {})
    if "per_device_train_batch_size" in trainer:
        trainer["global_train_batch_size"] = int(trainer.pop("per_device_train_batch_size")) * world_size()
        out["trainer"] = trainer
    if "batch_size" in out and "num_generations" in out:  # agent_rl: batch_size is per process
        out["global_batch_size"] = int(out.pop("batch_size")) * world_size()
    return out


def adopt_batch_layout(checkpoint: str | Path, per_process_batch: int) -> None:
    """Let a checkpoint written under another process count resume here.

    HF's Trainer restores the *per-process* batch size from `trainer_state.json` on resume, so a
    2-process checkpoint (batch 2 each) would resume one process at batch 2, not 4. The checkpoint
    folder's key already guarantees the same global batch (`run_identity`), so the recorded
    per-process batch is rewritten to this run's."""
    from mimesis_rl.fsutil import write_json

    path = Path(checkpoint) / "trainer_state.json"
    if not path.exists():
        return
    state = json.loads(path.read_text())
    if state.get("train_batch_size") not in (None, per_process_batch):
        log.info("resuming %s (batch %s per process) with %d processes at batch %d each", checkpoint,
                 state["train_batch_size"], world_size(), per_process_batch)
        state["train_batch_size"] = per_process_batch
        write_json(path, state)


def train(trainer: Any, resume: str | None) -> tuple[Any, dict[str, Any]]:
    """Run the trainer (resuming); (train output, the metrics every stage reports)."""
    import time

    if resume:
        adopt_batch_layout(resume, int(trainer.args.train_batch_size))
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - start
    return result, {"steps": int(trainer.state.global_step), "train_seconds": seconds,
                    "train_loss": float(result.training_loss),
                    "resumed_from_step": int(resume.rsplit("-", 1)[-1]) if resume else 0}


def save_simulator(trainer: Any, output_dir: str | Path, manifest: Any, weights: str = "adapter",
                   extra_files: Mapping[str, Any] | None = None) -> Path:
    """Write the simulator folder atomically: weights (`adapter` or `model`), tokenizer, manifest and
    `extra_files` (name -> object with `.save(path)`)."""
    from mimesis_rl.models.artifact import publish, staging_dir, write_manifest

    staged = staging_dir(output_dir)
    trainer.save_model(str(staged / weights))
    for stray in ("training_args.bin", "README.md"):
        (staged / weights / stray).unlink(missing_ok=True)
    trainer.processing_class.save_pretrained(str(staged / "tokenizer"))
    for name, obj in (extra_files or {}).items():
        obj.save(staged / name)
    write_manifest(staged, manifest)
    return publish(staged, output_dir)


def finish(trainer: Any, settings: Resumable, checkpoint_dir: Path, save: Any) -> None:
    """On the main process: `save()`, then drop the checkpoints unless asked to keep them."""
    import shutil

    if trainer.is_world_process_zero():
        log.info("process 0 of %d saves the model and the checkpoints' shared files", world_size())
        save()
        if not settings.keep_checkpoints:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)


def logged_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if v is not None}


def worker_main(module: str, run: Any, argv: list[str] | None = None) -> None:
    """`accelerate launch -m <module> PAYLOAD.json [RESULT.json]`: `run(payload)` -> metrics JSON."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit(f"usage: python -m {module} PAYLOAD.json [RESULT.json]")
    metrics = run(json.loads(Path(args[0]).read_text()))
    if len(args) > 1:
        from mimesis_rl.fsutil import write_json

        write_json(args[1], metrics)


# ----------------------------------------------------------------------------------------------
# The stage side (tasks/sim_sft.py, tasks/sim_rl.py)
# ----------------------------------------------------------------------------------------------

def stage_section(params: Mapping[str, Any], stage: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the stage's params section with `bf16: auto` made concrete, its `registry:` sub-dict)."""
    section = dict(params.get(stage) or {})
    registry = dict(section.pop("registry", None) or {})
    section["bf16"] = resolve_bf16(params, section)
    return section, registry


def run_stage(module: str, train_fn: Any, settings: TrainingSettings, payload: Mapping[str, Any],
              **kwargs: Any) -> dict[str, Any]:
    """Train in this process, or under `accelerate launch` when the settings say so."""
    if settings.launcher == "accelerate":
        return launch_worker(module, {"settings": settings.to_json(), **payload}, settings.accelerate_config)
    return train_fn(settings, **kwargs)


def register_simulator(output_dir: str, registry: Mapping[str, Any], data_version: str) -> dict[str, Any]:
    """Log the simulator folder into the stage run and register a new `mimesis-simulator` version."""
    if not registry.get("register", True):
        return {}
    from mimesis_rl.simulator.registry import REGISTERED_NAME, log_simulator
    from mimesis_rl.tracking import PARENT_RUN_ENV

    version = log_simulator(output_dir, name=registry.get("name", REGISTERED_NAME),
                            alias=registry.get("alias", "candidate"), data_version=data_version,
                            parent_run_id=os.environ.get(PARENT_RUN_ENV),
                            bundle=registry.get("bundle_base", "auto"),
                            max_bundle_mb=float(registry.get("max_bundle_mb", 200)))
    return {"registered_version": int(version.version)}
