"""Settings of the fidelity evaluation (`sim_eval.fidelity` in params.yaml), read by its run and metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_WEIGHTS = {"behaviour": 0.25, "turing": 0.2, "distribution": 0.15, "diversity": 0.05, "goal": 0.1,
                   "termination": 0.1, "role": 0.1, "perplexity": 0.05}


@dataclass(frozen=True)
class FidelitySettings:
    """Fidelity evaluation (`sim_eval.fidelity`).

    max_conversations / max_turns: how much held-out data (conversations drawn at random, seeded);
    turns_per_conversation: user turns simulated per conversation (first, last, random others; null = all).
    discriminator: features of the Turing-distance discriminator (`cheap` | `minilm`).
    embedding: `minilm` (sentence embeddings) or `hashing` (character n-grams + SVD, no model).
    clusters: k of the k-means histogram. perplexity_turns: real turns scored for perplexity (0 = off).
    max_context_tokens: the dialogue window each simulator sees (older exchanges dropped; null = the model's).
    real_patterns: `labeler` (label the real turns with the same labeler) or `data` (use the file's).
    weights: the Fidelity Index weights per component.
    """

    max_conversations: int | None = None
    max_turns: int | None = 400
    turns_per_conversation: int | None = 4
    discriminator: str = "cheap"
    embedding: str = "minilm"
    clusters: int = 8
    perplexity_turns: int = 200
    max_context_tokens: int | None = 1024
    real_patterns: str = "labeler"
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    seed: int = 0
