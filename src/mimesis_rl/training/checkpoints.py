"""One checkpoint and resume rule for every trainer.

Checkpoints live outside the stage's DVC outputs (DVC deletes outputs before a stage reruns) in a
folder named after a fingerprint of the settings, the seed and the data, so an interrupted run
resumes and a run with other settings never picks up a stale checkpoint. The folder is dropped once
the model is saved, unless `keep_checkpoints`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from transformers.trainer_utils import get_last_checkpoint

log = logging.getLogger(__name__)


class Resumable(Protocol):
    """What checkpointing needs of a stage's settings."""

    checkpoint_dir: str
    keep_checkpoints: bool

    def to_json(self) -> dict[str, Any]: ...


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (settings, data hashes)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def complete(checkpoint: Path) -> bool:
    """Whether a checkpoint was written whole: the Trainer writes `trainer_state.json` last (after the
    weights, optimizer, scheduler and RNG states), so a process killed while saving leaves none, or a
    truncated one."""
    try:
        json.loads((checkpoint / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return True


def latest_checkpoint(folder: str | Path) -> str | None:
    """The newest complete `checkpoint-N` under `folder` (None when there is none): what to resume from.

    A checkpoint a killed process left half-written is removed (with a warning naming it): resuming from
    it fails, and the Trainer's rotation would count it against `save_total_limit`."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    while (last := get_last_checkpoint(str(folder))) is not None:
        if complete(Path(last)):
            return last
        log.warning("checkpoint %s is incomplete (the run was killed while saving it): removed", last)
        shutil.rmtree(last, ignore_errors=True)
    return None


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
    return out


def checkpoint_folder(settings: Resumable, seed: int, data_hash: str = "") -> tuple[Path, str | None]:
    """(this run's checkpoint folder, the checkpoint to resume from or None).

    The folder is keyed by the settings, seed and data (stages whose data follow from settings + seed
    pass no hash): a run with other settings starts afresh instead of resuming a checkpoint that is
    not its own. How the run is launched is not part of the key (see `run_identity`): a checkpoint
    written by `accelerate launch` on 2 processes resumes in one process with the same global batch,
    and the other way round."""
    folder = Path(settings.checkpoint_dir) / fingerprint(run_identity(settings.to_json()), seed, data_hash)
    resume = latest_checkpoint(folder)
    if resume:
        log.info("resuming from %s", resume)
    return folder, resume


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
    if resume:
        adopt_batch_layout(resume, int(trainer.args.train_batch_size))
    start = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - start
    return result, {"steps": int(trainer.state.global_step), "train_seconds": seconds,
                    "train_loss": float(result.training_loss),
                    "resumed_from_step": int(resume.rsplit("-", 1)[-1]) if resume else 0}


def finish(trainer: Any, settings: Resumable, checkpoint_dir: Path, save: Callable[[], Any]) -> None:
    """On the main process: `save()`, then drop the checkpoints unless asked to keep them."""
    if trainer.is_world_process_zero():
        log.info("process 0 of %d saves the model and the checkpoints' shared files", world_size())
        save()
        if not settings.keep_checkpoints:
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
