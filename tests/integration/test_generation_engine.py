"""The fast paths of the decoding loop: the prefiltered sampler against its full-sort reference, the
LM head's frozen-weight copy kept away, and transcripts that do not depend on who shares the batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rollout_support import WordEnv, load_tiny, one_thread, tiny_dir, two_adapters  # noqa: F401
from torch.profiler import ProfilerActivity, profile

from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.chat import ChatFormat
from mimesis_rl.models.inference.generation import TagGuard
from mimesis_rl.models.inference.sampling import PREFILTER, reference_sample, sample_rows
from mimesis_rl.models.inference.scheduler import generate_batch
from mimesis_rl.rollout import ModelAgent, ModelRunner, run_rollouts
from mimesis_rl.simulator.runtime import UserSimulator

pytestmark = pytest.mark.integration


def _logits(rows: int, vocab: int, scale: float, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed)) * scale


@pytest.mark.parametrize("scale", [1.0, 6.0], ids=["flat", "peaked"])
@pytest.mark.parametrize(("top_k", "top_p"), [(0, 0.95), (50, 0.9), (0, 1.0)])
def test_prefiltered_sampler_picks_what_the_full_sort_picks(scale, top_k, top_p):
    logits = _logits(64, 5000, scale)
    seeds = np.arange(1000, 1064, dtype=np.uint64)
    for step in range(3):
        fast = sample_rows(logits / 0.8, seeds, step, top_k=top_k, top_p=top_p)
        slow = reference_sample(logits / 0.8, seeds, step, top_k=top_k, top_p=top_p)
        assert (fast == slow).float().mean() >= 63 / 64  # a tie at the top-p boundary may round apart


def test_sampler_draws_from_the_top_p_distribution():
    logits = torch.tensor([[2.0, 1.5, 1.0, 0.0, -1.0, -3.0]]).repeat(4000, 1)
    counts = torch.bincount(sample_rows(logits, np.arange(4000), 0, top_p=0.8), minlength=6).float() / 4000
    probs = torch.softmax(logits[0], -1)
    kept = probs[:3] / probs[:3].sum()  # 0.42 + 0.25 + 0.15 < 0.8: the third token is the boundary
    assert counts[3:].sum() == 0
    assert torch.allclose(counts[:3], kept, atol=0.03)
    assert PREFILTER >= 6


def test_unrestricted_sampler_draws_from_the_softmax_and_never_a_forbidden_token():
    logits = torch.tensor([[2.0, 1.5, 1.0, 0.0, -1.0, float("-inf")]]).repeat(4000, 1)
    counts = torch.bincount(sample_rows(logits, np.arange(4000), 0), minlength=6).float() / 4000
    assert counts[5] == 0
    assert torch.allclose(counts[:5], torch.softmax(logits[0, :5], -1), atol=0.03)
    many = _logits(16, 3000, 3.0, seed=2)
    seeds = np.arange(16, dtype=np.uint64)
    assert torch.equal(sample_rows(many, seeds, 4), reference_sample(many, seeds, 4))


def test_forbidding_a_token_other_than_the_winner_changes_nothing():
    logits = _logits(32, 2000, 4.0, seed=1)
    first = sample_rows(logits, np.arange(32), 0, top_p=0.95)
    banned = logits.clone()
    loser = logits.topk(3, dim=-1).indices  # forbid two of each row's top three, never its winner
    for row in range(32):
        others = [t for t in loser[row].tolist() if t != int(first[row])][:2]
        banned[row, others] = float("-inf")
    again = sample_rows(banned, np.arange(32), 0, top_p=0.95)
    # Forbidding mass moves the top-p boundary, which may add a candidate that then wins: rare.
    assert (again == first).float().mean() >= 0.9


def test_frozen_head_is_fed_contiguous_so_prefill_memory_does_not_grow_with_rows(tiny_dir):  # noqa: F811
    """Llama feeds the LM head `hidden[:, -1:]`; with frozen weights that slice made matmul fall back
    to a `bmm` that copied the (vocab x hidden) head once per row. `bmm` bytes must not grow with rows."""
    model, tok = load_tiny(tiny_dir)
    for param in model.parameters():
        param.requires_grad_(False)
    chat = ChatFormat(tok)

    def bmm_bytes(rows: int) -> int:
        contexts = [chat.prompt_ids([{"role": "user", "content": f"hello {i} " * 4}]) for i in range(rows)]
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            generate_batch(model, contexts, SamplingParams(max_new_tokens=1), stop_ids=chat.stop_ids,
                           pad_id=chat.pad_id)
        return sum(e.cpu_memory_usage for e in prof.key_averages() if e.key == "aten::bmm")

    head = model.get_output_embeddings().weight
    assert bmm_bytes(32) - bmm_bytes(2) < 30 * head.numel() * head.element_size() // 10


def test_a_dialogue_plays_the_same_alone_or_beside_fifteen_others(tiny_dir):  # noqa: F811
    """Sampled agent and sampled simulator (tag guard, re-samples) on one base: dialogue 5's transcript,
    reasoning included, is the same in a batch of 16 as alone."""
    model, tok = load_tiny(tiny_dir)
    model = two_adapters(model)
    agent_params = SamplingParams(max_new_tokens=10, do_sample=True, temperature=1.0, top_p=0.95)
    user_params = SamplingParams(max_new_tokens=12, do_sample=True, temperature=0.9, top_p=0.95,
                                 max_retries=1)

    def play(seeds: list[int]) -> list:
        agent = ModelAgent(ModelRunner(model, tok, agent_params, adapter="agent", seed=7))
        user_runner = ModelRunner(model, tok, user_params, adapter="simulator", seed=8,
                                  guard=TagGuard.for_tag(tok, "</think>", ChatFormat(tok).stop_ids))
        user = UserSimulator(user_runner, name="sim")
        states = run_rollouts(WordEnv(), agent, user, seeds, progress=False).states
        return [[(t.role, t.content, t.reasoning) for t in s.trace] for s in states]

    crowd = play(list(range(16)))
    assert play([5]) == [crowd[5]]
    assert len({str(d) for d in crowd}) > 8  # the crowd really differs from dialogue to dialogue
