"""Where a model party's weights come from: a local folder or an MLflow URI, resolved to base + adapter.

Accepted folders (found at the top or one level down, as MLflow downloads may nest them):

- a MIMESIS model folder (`mimesis.json`, see `mimesis_rl.models.artifact`): a simulator or an
  agent, with its base, its LoRA adapter or full weights, its decoding settings;
- a PEFT adapter folder (`adapter_config.json`): the adapter over a bundled `base/`, else over the
  base its config names, else over the default base;
- a full transformers model folder (`config.json`).

MLflow URIs (`models:/name@alias`, `models:/name/3`, `runs:/id/path`) are downloaded once per
immutable version into a cache folder (`MIMESIS_CACHE_DIR`, default `~/.cache/mimesis-rl`), so
repeated loads neither download again nor leave temporary folders behind.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mimesis_rl.models.artifact import MANIFEST, ModelManifest, base_reference, read_manifest
from mimesis_rl.models.decoding import SamplingParams

log = logging.getLogger(__name__)

MLFLOW_SCHEMES = ("models:/", "runs:/", "mlflow-artifacts:/")
_MARKERS = (MANIFEST, "adapter_config.json", "config.json")


@dataclass
class ModelSource:
    """A resolved model: load `base`, put `adapter` on it (if any), talk through `tokenizer`."""

    spec: str
    base: Path
    adapter: Path | None = None
    tokenizer: Path | None = None
    manifest: ModelManifest | None = None  # a MIMESIS model folder's own manifest
    folder: Path | None = None  # that folder (files the owner reads besides the weights)
    notes: list[str] = field(default_factory=list)

    @property
    def sampling(self) -> SamplingParams | None:
        """The folder's own decoding settings, when it has them."""
        return self.manifest.sampling if self.manifest is not None else None


def is_mlflow_uri(spec: str) -> bool:
    return spec.startswith(MLFLOW_SCHEMES)


def cache_root() -> Path:
    return Path(os.environ.get("MIMESIS_CACHE_DIR") or Path.home() / ".cache" / "mimesis-rl")


def _cache_key(spec: str) -> str:
    """An immutable name for what `spec` points to now: registry aliases resolve to their version."""
    import mlflow

    match = re.fullmatch(r"models:/([^/@]+)@(.+)", spec)
    if match:
        version = mlflow.MlflowClient().get_model_version_by_alias(match.group(1), match.group(2))
        spec = f"models:/{match.group(1)}/{version.version}"
    tracking = mlflow.get_tracking_uri()
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{tracking}|{spec}")[-180:]


def fetch(spec: str) -> Path:
    """A local folder for `spec`: the folder itself, or the cached download of an MLflow URI."""
    if is_mlflow_uri(spec):
        import mlflow

        from mimesis_rl.config import tracking_uri

        mlflow.set_tracking_uri(tracking_uri())
        try:
            dest = cache_root() / "models" / _cache_key(spec)
            if not (dest / ".complete").exists():
                staged = dest.with_name(dest.name + f".tmp{os.getpid()}")
                shutil.rmtree(staged, ignore_errors=True)
                staged.mkdir(parents=True)
                try:
                    mlflow.artifacts.download_artifacts(artifact_uri=spec, dst_path=str(staged))
                    (staged / ".complete").touch()
                    shutil.rmtree(dest, ignore_errors=True)
                    staged.rename(dest)
                finally:
                    shutil.rmtree(staged, ignore_errors=True)
            return dest
        except Exception as exc:  # MLflow raises several types for a missing name/alias/version
            raise ValueError(
                f"cannot download {spec!r} from the MLflow store at {mlflow.get_tracking_uri()}: {exc}"
            ) from exc
    path = Path(spec)
    if not path.is_dir():
        raise FileNotFoundError(
            f"model spec {spec!r}: no such folder (and not an MLflow URI "
            f"{' | '.join(s + '…' for s in MLFLOW_SCHEMES)})"
        )
    return path


def model_folder(root: Path) -> Path:
    """The folder holding the model, at `root` or one level down (MLflow downloads nest)."""
    for marker in _MARKERS:
        if (root / marker).exists():
            return root
    for child in sorted(p for p in root.iterdir() if p.is_dir()):
        if any((child / marker).exists() for marker in _MARKERS):
            return child
    raise ValueError(
        f"{root}: not a model folder (expected one of {', '.join(_MARKERS)} at the top or one level down)"
    )


def resolve_base(folder: str | Path, manifest: ModelManifest) -> Path:
    """The base folder: the bundled copy; else the recorded path (when a registry URI is recorded too, only
    if the path holds the recorded base); else the registry version `base.uri` names (downloaded once)."""
    bundled = Path(folder) / "base"
    recorded = manifest.base.get("manifest") or {}
    path = manifest.base.get("path")
    local = Path(path) if path else None
    uri = manifest.base.get("uri")
    if bundled.is_dir():
        candidate = bundled
    elif local is not None and local.is_dir() and (not uri or not recorded
                                                    or base_reference(local)["manifest"] == recorded):
        candidate = local
    elif uri:
        try:
            return model_folder(fetch(uri))
        except (ValueError, FileNotFoundError) as exc:
            raise FileNotFoundError(f"{folder}: base model {path or '(no path)'} not found here, and its "
                                    f"registry version {uri} could not be fetched: {exc}") from exc
    else:
        raise FileNotFoundError(f"{folder}: base model {path} not found (build it with "
                                "`python -m tasks.base_model`, or log the model with its base bundled "
                                "or registered)")
    found = base_reference(candidate)["manifest"]
    if recorded and found and recorded != found:
        log.warning("%s: base at %s differs from the one the model was trained on", folder, candidate)
    return candidate


def _from_manifest(spec: str, folder: Path, default_base: Path) -> ModelSource:
    manifest = read_manifest(folder)
    if manifest.kind == "prompted":
        base = resolve_base(folder, manifest) if (folder / "base").is_dir() or Path(
            manifest.base.get("path", "")).is_dir() else default_base
    else:
        base = resolve_base(folder, manifest) if manifest.kind == "lora" else folder / "model"
    tokenizer = folder / "tokenizer" if (folder / "tokenizer").is_dir() else base
    source = ModelSource(spec=spec, base=base, tokenizer=tokenizer, manifest=manifest, folder=folder)
    if manifest.kind == "lora":
        source.adapter = folder / "adapter"
    return source


def _from_adapter(spec: str, folder: Path, default_base: Path) -> ModelSource:
    config = json.loads((folder / "adapter_config.json").read_text())
    named = config.get("base_model_name_or_path") or ""
    if (folder / "base").is_dir():
        base = folder / "base"
    elif named and Path(named).is_dir():
        base = Path(named)
    else:
        base = default_base
        if named:
            log.warning("%s: adapter names base %r, which is not a local folder; using %s", spec, named, base)
    if not base.is_dir():
        raise FileNotFoundError(
            f"{spec}: base model {base} for the adapter not found "
            "(build it with `python -m tasks.base_model`)"
        )
    return ModelSource(spec=spec, base=base, adapter=folder, tokenizer=base)


def resolve_source(spec: str | Path, default_base: str | Path) -> ModelSource:
    """The base/adapter/tokenizer a model spec names (a folder or an MLflow URI)."""
    spec = str(spec)
    folder = model_folder(fetch(spec))
    if (folder / MANIFEST).exists():
        return _from_manifest(spec, folder, Path(default_base))
    if (folder / "adapter_config.json").exists():
        return _from_adapter(spec, folder, Path(default_base))
    return ModelSource(spec=spec, base=folder, tokenizer=folder)
