"""A trained party on disk (a simulator or an agent): one folder the runtime, registry and evaluation read.

    mimesis.json     role (simulator | agent), kind (lora | full | prompted), base reference, turn
                     format, decoding settings
    adapter/         LoRA weights (kind lora)
    model/           full weights (kind full)
    tokenizer/       the tokenizer the party was trained with
    base/            optional copy of the base model (bundled for the registry when it is small)
    leave.json       a simulator's learned leave model (`simulator.leaving`), when it has one

The base reference is the base folder's path plus its `mimesis_base.json`, so a loader can tell
when the base it finds is not the one the adapter was trained on. A registered version whose base is
not bundled also records the base's registry URI (`uri`, e.g. `models:/mimesis-base/2`) and its DVC
md5 (`md5`): where the path is absent (another machine, an empty folder, the service) or holds
another base, `models.inference.sources.resolve_base` downloads that version (cached under
`MIMESIS_CACHE_DIR`). This module only reads and writes the folder: JSON and files, no torch, no MLflow.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.fsutil import swap_in_dir, write_json
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.manifest import sha256_file

MANIFEST = "mimesis.json"
KINDS = ("lora", "full", "prompted")
ROLES = ("simulator", "agent")
# The project's user sampling, the one place it is written: a user varies, so sampled, with one
# re-sample of an unusable turn. Simulator folders record it as their decoding unless trained with
# other settings; prompted and remote users, the rollout settings' `user_*` defaults and the agent
# stages' users take it (changing only the token budget).
DEFAULT_SAMPLING = SamplingParams(max_new_tokens=96, do_sample=True, temperature=0.8, top_p=0.95,
                                  max_retries=1)


@dataclass
class ModelManifest:
    """What a loader needs besides the weights. `format` is the turn format the party was trained
    in (its owner checks the version); `generation` holds `SamplingParams` fields."""

    kind: str
    base: dict[str, Any]
    role: str = "simulator"
    generation: dict[str, Any] = field(default_factory=lambda: asdict(DEFAULT_SAMPLING))
    format: dict[str, str] = field(default_factory=dict)
    max_behaviours: int = 4
    behaviours: list[str] = field(default_factory=list)  # a simulator's default behaviour profile
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"model kind {self.kind!r}: expected one of {KINDS}")
        if self.role not in ROLES:
            raise ValueError(f"model role {self.role!r}: expected one of {ROLES}")

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams.from_dict(self.generation)


def base_reference(base_dir: str | Path) -> dict[str, Any]:
    """Path + the base's own manifest (what it was built from)."""
    base_dir = Path(base_dir)
    manifest_path = base_dir / "mimesis_base.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.pop("versions", None)
    return {"path": str(base_dir), "manifest": manifest}


def write_manifest(folder: str | Path, manifest: ModelManifest) -> Path:
    path = Path(folder) / MANIFEST
    write_json(path, asdict(manifest))
    return path


def is_model_folder(folder: str | Path) -> bool:
    return (Path(folder) / MANIFEST).exists()


def read_manifest(folder: str | Path) -> ModelManifest:
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{path}: not a MIMESIS model folder (no {MANIFEST})")
    data = json.loads(path.read_text())
    known = set(ModelManifest.__dataclass_fields__)
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown manifest fields {unknown}; known: {sorted(known)}")
    return ModelManifest(**data)


def bundle_base(folder: str | Path, base_dir: str | Path) -> Path:
    """Copy the base into the model folder (self-contained artifact)."""
    target = Path(folder) / "base"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(base_dir, target)
    return target


def staging_dir(target: str | Path) -> Path:
    """An empty sibling folder to write a model into before `publish` swaps it in."""
    target = Path(target)
    staged = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    return staged


def publish(staged: Path, target: str | Path) -> Path:
    """Swap a fully written folder into place: the output appears whole or not at all."""
    swap_in_dir(staged, target)
    return Path(target)


def behaviour_fingerprint(folder: str | Path) -> str:
    """A hash of what decides how the folder's party acts: every file (weights, tokenizer, leave model)
    and the manifest, except its `extra` (provenance: which stage, against whom) and READMEs. Two
    folders with one fingerprint play alike, e.g. an RL stage that kept its warm start's weights. A
    plain transformers folder (no manifest) is its files."""
    folder = Path(folder)
    digest = hashlib.sha256()
    if is_model_folder(folder):
        manifest = {k: v for k, v in asdict(read_manifest(folder)).items() if k != "extra"}
        digest.update(json.dumps(manifest, sort_keys=True).encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.name in (MANIFEST, "README.md"):
            continue
        content = _canonical_json(path) if path.suffix == ".json" else None
        file_hash = hashlib.sha256(content).hexdigest() if content is not None else sha256_file(path)
        digest.update(f"{path.relative_to(folder).as_posix()}:{file_hash};".encode())
    return digest.hexdigest()


def _canonical_json(path: Path) -> bytes | None:
    """A small JSON config as its meaning, not its spelling. Why: an RL stage that kept its warm start
    re-saves the same weights with PEFT's `target_modules` in another order and the tokenizer's pad
    token as an object instead of its string (the fifth evidence run), and those two folders play
    alike. None for a file too large to be a config (tokenizer.json): hashed as bytes."""
    if path.stat().st_size > 1_000_000:
        return None

    def canon(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            if set(value) >= {"content", "lstrip", "rstrip"}:  # an AddedToken written out in full
                return value["content"]
            return {k: canon(v, k) for k, v in value.items()}
        if isinstance(value, list):
            items = [canon(v) for v in value]
            return sorted(items, key=json.dumps) if key == "target_modules" else items
        return value

    try:
        return json.dumps(canon(json.loads(path.read_text())), sort_keys=True).encode()
    except (ValueError, UnicodeDecodeError):
        return None


def folder_size(path: str | Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
