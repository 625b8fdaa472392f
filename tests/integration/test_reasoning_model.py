"""The `model` reasoning backend on a tiny real Llama: batched generation, checks, template fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mimesis_rl.behavior.reasoning import TemplateRationalizer, iter_contexts, repetition_problem
from mimesis_rl.behavior.reasoning.model import ModelRationalizer
from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.data.schema import Conversation
from mimesis_rl.models.loading import load_base
from mimesis_rl.models.testing import make_tiny_base

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reasoning" / "conversations.jsonl"


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_base(tmp_path_factory.mktemp("tiny_base"), seed=0)


@pytest.fixture(scope="module")
def conversations() -> list[Conversation]:
    return [c for c in read_conversations(FIXTURE) if c.conversation_id == "chitchat-fx-2-a"]


def user_turns(conversations: list[Conversation]) -> int:
    return sum(1 for c in conversations for t in c.turns if t.role == "user")


def backend(path: Path, **kwargs) -> ModelRationalizer:
    model, tokenizer = load_base(path, dtype="float32", device="cpu", padding_side="left")
    return ModelRationalizer(model, tokenizer, fallback=TemplateRationalizer(seed=0), max_new_tokens=8,
                             batch_size=4, seed=0, **kwargs)


def test_random_tiny_model_gives_every_user_turn_a_checked_trace_reproducibly(tiny_base, conversations):
    rationalizer = backend(tiny_base)
    out = rationalizer.rationalize(conversations)
    stats = rationalizer.stats
    assert stats.turns == user_turns(conversations)
    assert stats.written + stats.fallback_total == stats.turns
    for conv in out:
        for turn in conv.turns:
            if turn.role == "user":
                assert repetition_problem(turn.reasoning, turn.content) is None
                assert "\ufffd" not in turn.reasoning
    again = backend(tiny_base).rationalize(conversations)
    assert [t.reasoning for c in out for t in c.turns] == [t.reasoning for c in again for t in c.turns]


def test_model_that_only_emits_special_tokens_falls_back_to_template(tiny_base, conversations):
    rationalizer = backend(tiny_base)
    # A zero output head makes every logit equal: greedy/sampled ids collapse onto special tokens
    # or noise; with do_sample off, argmax is id 0 (<|endoftext|>), which decodes to nothing.
    with torch.no_grad():
        rationalizer.model.get_output_embeddings().weight.zero_()
    rationalizer.generation["do_sample"] = False
    rationalizer.generation.pop("temperature", None)
    rationalizer.generation.pop("top_p", None)
    assert rationalizer.tokenizer.convert_ids_to_tokens(0) in rationalizer.tokenizer.all_special_tokens
    out = rationalizer.rationalize(conversations)
    turns = user_turns(conversations)
    assert rationalizer.stats.fallbacks == {"empty": turns}
    assert rationalizer.stats.written == 0
    expected = TemplateRationalizer(seed=0).rationalize(conversations)
    assert [t.reasoning for c in out for t in c.turns] == [t.reasoning for c in expected for t in c.turns]


def test_short_traces_fall_back_as_too_short(tiny_base, conversations):
    rationalizer = backend(tiny_base, min_words=1000)
    rationalizer.rationalize(conversations)
    stats = rationalizer.stats
    assert stats.written == 0
    assert stats.fallback_total == user_turns(conversations)
    assert set(stats.fallbacks) <= {"too_short", "empty", "repeats_message"}
    assert stats.fallbacks["too_short"] >= 1


def test_prompt_fits_the_model_context(tiny_base, conversations):
    rationalizer = backend(tiny_base)
    limit = rationalizer.model.config.max_position_embeddings
    assert rationalizer.max_prompt_tokens == min(768, limit - 8)
    ctx = next(iter_contexts(conversations[0]))
    prompt = rationalizer.prompt(ctx)
    assert ctx.message in prompt and prompt.endswith("assistant\nI")  # answer prefilled with "I"
