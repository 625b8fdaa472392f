"""A tiny real base model for other packages' tests: seeded, built in a few seconds, no network."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mimesis_rl.models.acquire import build_tiny
from mimesis_rl.models.config import TinySettings

SAMPLE_TEXTS: tuple[str, ...] = (
    "Hi! I'm looking for a hotel in the city centre for two nights.",
    "Sure, what is your budget per night?",
    "Something nice but not too pricey... maybe under 120?",
    "I found three options near the old town. Do you want breakfast included?",
    "no. actually wait, yes, my kids come along so breakfast matters.",
    "Why do you need my phone number? I'd rather not share it.",
    "That's way too expensive, can you do better on the price?",
    "<think>I want the cheaper one but won't say it yet.</think>Hmm, what else do you have?",
    "I'm frustrated, this is the third time I ask the same thing!",
    "Could you explain why this option is better than the first one?",
    "Let me think about it. Forget the hotel, I need a flight instead.",
    "Thanks, that works for me. Bye!",
)

TINY_TEST_CONFIG = TinySettings(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)


def make_tiny_base(output_dir: str | Path, texts: Sequence[str] | None = None, seed: int = 0,
                   config: TinySettings = TINY_TEST_CONFIG) -> Path:
    """Build a tiny Llama + BPE tokenizer (our chat template included) into `output_dir`; returns it."""
    corpus = list(texts) if texts else list(SAMPLE_TEXTS) * 4
    return build_tiny(output_dir, corpus, config, seed=seed, source="mimesis_rl.models.testing").output_dir
