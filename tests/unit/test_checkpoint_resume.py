"""Resuming picks the newest checkpoint written whole; one a killed process left half-written is removed."""

from __future__ import annotations

import json
from pathlib import Path

from mimesis_rl.training.checkpoints import latest_checkpoint


def _checkpoint(folder: Path, step: int, whole: bool) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "adapter_model.safetensors").write_bytes(b"weights")
    if whole:  # the Trainer writes its state last
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


def test_a_half_written_checkpoint_is_skipped_and_removed(tmp_path: Path) -> None:
    whole = _checkpoint(tmp_path, 2, whole=True)
    half = _checkpoint(tmp_path, 4, whole=False)
    truncated = _checkpoint(tmp_path, 6, whole=True)
    (truncated / "trainer_state.json").write_text('{"global_st')
    assert latest_checkpoint(tmp_path) == str(whole)
    assert not half.exists() and not truncated.exists() and whole.exists()


def test_nothing_to_resume(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path / "absent") is None
    _checkpoint(tmp_path, 2, whole=False)
    assert latest_checkpoint(tmp_path) is None
