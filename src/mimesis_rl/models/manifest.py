"""`mimesis_base.json`: what a base-model folder was made from, so a run can name its base exactly."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mimesis_rl.fsutil import write_json

MANIFEST = "mimesis_base.json"


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_texts(texts: Iterable[str]) -> str:
    """Order-sensitive hash of a text corpus (each text length-prefixed, so boundaries count)."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def write_manifest(output_dir: str | Path, **fields: Any) -> dict[str, Any]:
    import tokenizers
    import torch
    import transformers

    manifest = {
        **fields,
        "versions": {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "torch": torch.__version__},
    }
    write_json(Path(output_dir) / MANIFEST, manifest)
    return manifest


def read_manifest(model_dir: str | Path) -> dict[str, Any]:
    path = Path(model_dir) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{path}: no base-model manifest (build it: `python -m tasks.base_model`)")
    return json.loads(path.read_text())
