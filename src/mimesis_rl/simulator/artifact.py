"""A trained simulator on disk: weights (`adapter/` or `model/`), `tokenizer/`, `mimesis.json` and the
files trained beside the LM (leave model, realism discriminator), written atomically by the trainer
that made it (sim_sft, sim_rl). `UserSimulator.load` and the registry read this folder; every loader
checks its manifest through `simulator_manifest`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mimesis_rl.models.artifact import ModelManifest, publish, staging_dir, write_manifest
from mimesis_rl.simulator.format import FORMAT_VERSION

# `mimesis.json`'s extra key: true when the simulator's decisions are read from its reasoning where its
# message says neither yes nor no (`sim_sft.decide_by_reasoning`, `UserSimulator.decide_by_reasoning`)
DECIDE_BY_REASONING = "decide_by_reasoning"


def save_simulator(trainer: Any, output_dir: str | Path, manifest: ModelManifest, weights: str = "adapter",
                   extra_files: Mapping[str, Any] | None = None) -> Path:
    """Write the simulator folder atomically: weights (`adapter` or `model`), tokenizer, manifest and
    `extra_files` (name -> object with `.save(path)`)."""
    staged = staging_dir(output_dir)
    trainer.save_model(str(staged / weights))
    for stray in ("training_args.bin", "README.md"):
        (staged / weights / stray).unlink(missing_ok=True)
    trainer.processing_class.save_pretrained(str(staged / "tokenizer"))
    for name, obj in (extra_files or {}).items():
        obj.save(staged / name)
    write_manifest(staged, manifest)
    return publish(staged, output_dir)


def simulator_manifest(source: str, manifest: ModelManifest | None) -> ModelManifest:
    """The manifest of a simulator folder this code can run: role `simulator`, and (trained ones) the turn
    format this code speaks. Every loader of a simulator folder checks through here."""
    if manifest is None or manifest.role != "simulator":
        raise ValueError(f"{source}: not a simulator folder (no mimesis.json with role `simulator`)")
    version = manifest.format.get("version")
    if manifest.kind != "prompted" and version != FORMAT_VERSION:
        raise ValueError(f"{source}: turn format {version!r}, this code speaks {FORMAT_VERSION!r} "
                         "(retrain it with `mimesis stage sim_sft`)")
    return manifest
