"""Byte-level BPE tokenizers in one shape for every base model: ChatML special tokens at ids 0-2,
no BOS added by the tokenizer itself (the chat template opens every turn), a distinct pad token, and
untrimmed offsets so assistant-token masks line up with characters.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from mimesis_rl.models.chat_template import BOS, END_OF_TEXT, END_OF_TURN, SPECIAL_TOKENS, chatml_template


def wrap_tokenizer(backend: Tokenizer, chat_template: str, model_max_length: int) -> PreTrainedTokenizerFast:
    """A transformers tokenizer over a byte-level `tokenizers` backend, with our special-token roles."""
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=END_OF_TURN,
        unk_token=END_OF_TEXT,
        pad_token=END_OF_TEXT,
        chat_template=chat_template,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
        padding_side="right",
        model_input_names=["input_ids", "attention_mask"],  # Llama takes no token_type_ids
    )


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int, model_max_length: int = 1024,
                        min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts`; every byte is in the alphabet, so nothing is ever unknown."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer)
    return wrap_tokenizer(backend, chatml_template(), model_max_length)


def from_gguf_tokenizer(tokenizer: PreTrainedTokenizerBase, default_system: str | None,
                        model_max_length: int) -> PreTrainedTokenizerFast:
    """Repair the tokenizer transformers rebuilds from a GGUF file.

    The GGUF metadata of SmolLM2 maps eos to `<|im_start|>` and makes the tokenizer prepend it to
    every text; keep the vocabulary and merges, fix the roles and attach our chat template.
    """
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    vocab = backend.get_vocab()
    missing = [tok for tok in SPECIAL_TOKENS if tok not in vocab]
    if missing:
        raise ValueError(f"GGUF tokenizer lacks the ChatML special tokens {missing}")
    return wrap_tokenizer(backend, chatml_template(default_system), model_max_length)
