"""A simulator on disk: one folder that the API, the registry and the evaluation all read.

    simulator.json   kind (lora | full | prompted), base reference, turn format, generation config
    adapter/         LoRA weights (kind lora)
    model/           full weights (kind full)
    tokenizer/       the tokenizer the simulator was trained with
    base/            optional copy of the base model (bundled for the registry when it is small)

The base reference is the base folder's path plus its `mimesis_base.json`, so a loader can tell
when the base it finds is not the one the adapter was trained on.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.fsutil import swap_in_dir, write_json
from mimesis_rl.simulator.format import FORMAT_VERSION, format_spec

log = logging.getLogger(__name__)

MANIFEST = "simulator.json"
KINDS = ("lora", "full", "prompted")


@dataclass(frozen=True)
class GenerationSettings:
    """How the simulator decodes (`sim_sft.generation`): sampling by default, like a real user varies."""

    max_new_tokens: int = 96
    do_sample: bool = True
    temperature: float = 0.8
    top_p: float = 0.95
    max_retries: int = 1  # re-sample a turn whose output the parser rejects

    def generate_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample}
        if self.do_sample:
            kwargs.update(temperature=self.temperature, top_p=self.top_p)
        return kwargs


@dataclass
class SimulatorManifest:
    kind: str
    base: dict[str, Any]
    generation: dict[str, Any] = field(default_factory=lambda: asdict(GenerationSettings()))
    format: dict[str, str] = field(default_factory=format_spec)
    max_behaviours: int = 4
    behaviours: list[str] = field(default_factory=list)  # default behaviour profile for new sessions
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"simulator kind {self.kind!r}: expected one of {KINDS}")


def base_reference(base_dir: str | Path) -> dict[str, Any]:
    """Path + the base's own manifest (what it was built from)."""
    base_dir = Path(base_dir)
    manifest_path = base_dir / "mimesis_base.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.pop("versions", None)
    return {"path": str(base_dir), "manifest": manifest}


def write_manifest(folder: str | Path, manifest: SimulatorManifest) -> Path:
    path = Path(folder) / MANIFEST
    write_json(path, asdict(manifest))
    return path


def read_manifest(folder: str | Path) -> SimulatorManifest:
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a simulator folder (no {MANIFEST})")
    data = json.loads(path.read_text())
    version = data.get("format", {}).get("version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: turn format {version!r}, this code speaks {FORMAT_VERSION!r}")
    return SimulatorManifest(**data)


def resolve_base(folder: str | Path, manifest: SimulatorManifest) -> Path:
    """The base folder: the bundled copy, else the recorded path; warns when its manifest differs."""
    bundled = Path(folder) / "base"
    candidate = bundled if bundled.is_dir() else Path(manifest.base["path"])
    if not candidate.is_dir():
        raise FileNotFoundError(f"{folder}: base model {manifest.base['path']} not found (build it with "
                                "`python -m tasks.base_model`, or log the simulator with its base bundled)")
    recorded = manifest.base.get("manifest") or {}
    found = base_reference(candidate)["manifest"]
    if recorded and found and recorded != found:
        log.warning("%s: base at %s differs from the one the simulator was trained on", folder, candidate)
    return candidate


def bundle_base(folder: str | Path, base_dir: str | Path) -> Path:
    """Copy the base into the simulator folder (self-contained artifact)."""
    target = Path(folder) / "base"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(base_dir, target)
    return target


def staging_dir(target: str | Path) -> Path:
    """An empty sibling folder to write a simulator into before `publish` swaps it in."""
    target = Path(target)
    staged = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    return staged


def publish(staged: Path, target: str | Path) -> Path:
    """Swap a fully written folder into place: the output appears whole or not at all."""
    swap_in_dir(staged, target)
    return Path(target)


def folder_size(path: str | Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
