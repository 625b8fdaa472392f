"""Where a model party's weights come from: a local folder or an MLflow URI, resolved to base + adapter.

Accepted folders (found at the top or one level down, as MLflow downloads may nest them):

- a simulator folder (`simulator.json`, see `mimesis_rl.simulator.artifact`): its base, its LoRA
  adapter or full weights, its decoding settings and default behaviours;
- a PEFT adapter folder (`adapter_config.json`): the adapter over a bundled `base/`, else over the
  base its config names, else over the default base;
- a full transformers model folder (`config.json`).

MLflow URIs (`models:/name@alias`, `models:/name/3`, `runs:/id/path`) are downloaded with
`mlflow.artifacts.download_artifacts` from the project's tracking store.
"""

from __future__ import annotations

import atexit
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mimesis_rl.rollout.generation import SamplingParams

log = logging.getLogger(__name__)

MLFLOW_SCHEMES = ("models:/", "runs:/", "mlflow-artifacts:/")
_MARKERS = ("simulator.json", "adapter_config.json", "config.json")


@dataclass
class ModelSource:
    """A resolved model: load `base`, put `adapter` on it (if any), talk through `tokenizer`."""

    spec: str
    base: Path
    adapter: Path | None = None
    tokenizer: Path | None = None
    sampling: SamplingParams | None = None  # the folder's own decoding settings, when it has them
    behaviours: tuple[str, ...] = ()
    card_style: str = "simulator"  # how a user side prompts it (simulator.json `extra.card_style`)
    notes: list[str] = field(default_factory=list)


def is_mlflow_uri(spec: str) -> bool:
    return spec.startswith(MLFLOW_SCHEMES)


def fetch(spec: str) -> Path:
    """A local folder for `spec`: the folder itself, or a fresh download of an MLflow URI."""
    if is_mlflow_uri(spec):
        import mlflow

        from mimesis_rl.tracking import tracking_uri

        mlflow.set_tracking_uri(tracking_uri())
        dest = Path(tempfile.mkdtemp(prefix="mimesis-model-"))
        atexit.register(shutil.rmtree, dest, ignore_errors=True)
        try:
            return Path(mlflow.artifacts.download_artifacts(artifact_uri=spec, dst_path=str(dest)))
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


def _model_folder(root: Path) -> Path:
    for marker in _MARKERS:
        if (root / marker).exists():
            return root
    for child in sorted(p for p in root.iterdir() if p.is_dir()):
        if any((child / marker).exists() for marker in _MARKERS):
            return child
    raise ValueError(
        f"{root}: not a model folder (expected one of {', '.join(_MARKERS)} at the top or one level down)"
    )


def _from_simulator(spec: str, folder: Path) -> ModelSource:
    from mimesis_rl.simulator.artifact import read_manifest, resolve_base

    manifest = read_manifest(folder)
    base = resolve_base(folder, manifest)
    gen = manifest.generation or {}
    sampling = SamplingParams(
        max_new_tokens=int(gen.get("max_new_tokens", 96)),
        do_sample=bool(gen.get("do_sample", True)),
        temperature=float(gen.get("temperature", 1.0) or 1.0),
        top_p=float(gen.get("top_p", 1.0) or 1.0),
    )
    tokenizer = folder / "tokenizer" if (folder / "tokenizer").is_dir() else base
    style = manifest.extra.get("card_style") or ("prompted" if manifest.kind == "prompted" else "simulator")
    source = ModelSource(
        spec=spec,
        base=base,
        tokenizer=tokenizer,
        sampling=sampling,
        behaviours=tuple(manifest.behaviours),
        card_style=str(style),
    )
    if manifest.kind == "lora":
        source.adapter = folder / "adapter"
    elif manifest.kind == "full":
        source.base = folder / "model"
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


def resolve_source(spec: str, default_base: str | Path) -> ModelSource:
    """The base/adapter/tokenizer a model spec names (a folder or an MLflow URI)."""
    folder = _model_folder(fetch(spec))
    if (folder / "simulator.json").exists():
        return _from_simulator(spec, folder)
    if (folder / "adapter_config.json").exists():
        return _from_adapter(spec, folder, Path(default_base))
    return ModelSource(spec=spec, base=folder, tokenizer=folder)
