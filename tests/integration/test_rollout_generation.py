"""The batched generate core: padding-invariant outputs, exact log-probs, per-row seeded sampling."""

from __future__ import annotations

import pytest
import torch
from rollout_support import load_tiny, one_thread, recompute_logprobs, tiny_dir  # noqa: F401

from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.chat import ChatFormat
from mimesis_rl.models.inference.generation import TagGuard
from mimesis_rl.models.inference.scheduler import generate_batch

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def model_tok(tiny_dir):  # noqa: F811
    return load_tiny(tiny_dir)


def _contexts(tok) -> list[list[int]]:
    chat = ChatFormat(tok)
    return [
        chat.prompt_ids(
            [{"role": "system", "content": "Be brief." * k}, {"role": "user", "content": f"hello number {k}"}]
        )
        for k in (1, 4, 2, 7)
    ]


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(max_new_tokens=12),
        SamplingParams(max_new_tokens=12, do_sample=True, temperature=0.8, top_p=0.95, top_k=50),
    ],
    ids=["greedy", "sampled"],
)
def test_batch_equals_single_and_logprobs_match_a_recomputation(model_tok, params):
    model, tok = model_tok
    contexts = _contexts(tok)
    assert len({len(c) for c in contexts}) > 1, "contexts must differ in length so padding is exercised"
    chat = ChatFormat(tok)
    seeds = [11, 12, 13, 14]
    batch = generate_batch(model, contexts, params, stop_ids=chat.stop_ids, pad_id=chat.pad_id, seeds=seeds)
    assert model.config._attn_implementation == "sdpa"  # the grouped-attention switch was undone
    for ctx, seed, gen in zip(contexts, seeds, batch, strict=True):
        alone = generate_batch(
            model, [ctx], params, stop_ids=chat.stop_ids, pad_id=chat.pad_id, seeds=[seed]
        )[0]
        assert gen.token_ids == alone.token_ids
        assert len(gen.logprobs) == len(gen.token_ids) > 0
        # The policy's log-prob is log_softmax(logits / T), the quantity TRL recomputes.
        temperature = params.temperature if params.do_sample else 1.0
        expected = recompute_logprobs(model, ctx, gen.token_ids, temperature)
        assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)


def test_rows_stop_at_their_own_stop_token_and_report_truncation(model_tok):
    model, tok = model_tok
    contexts = _contexts(tok)
    chat = ChatFormat(tok)
    free = generate_batch(
        model, contexts, SamplingParams(max_new_tokens=10), stop_ids=chat.stop_ids, pad_id=chat.pad_id
    )
    # Make a greedy token of row 0 a stop token: each row must end at its first occurrence, if any.
    stop = free[0].token_ids[2]
    stopped = generate_batch(
        model, contexts, SamplingParams(max_new_tokens=10), stop_ids=[stop], pad_id=chat.pad_id
    )
    assert stopped[0].stopped
    for gen, ref in zip(stopped, free, strict=True):
        if stop in ref.token_ids:
            cut = ref.token_ids.index(stop) + 1
            assert gen.token_ids == ref.token_ids[:cut] and gen.stopped
        else:
            assert gen.token_ids == ref.token_ids and gen.truncated and len(gen.token_ids) == 10
        assert len(gen.logprobs) == len(gen.token_ids)


def test_sampling_is_seeded_per_row(model_tok):
    model, tok = model_tok
    ctx = _contexts(tok)[0]
    chat = ChatFormat(tok)
    params = SamplingParams(max_new_tokens=12, do_sample=True, temperature=1.5)
    a = generate_batch(
        model, [ctx, ctx, ctx], params, stop_ids=chat.stop_ids, pad_id=chat.pad_id, seeds=[1, 2, 1]
    )
    assert a[0].token_ids == a[2].token_ids  # same seed, same sample, whatever the row
    assert a[0].token_ids != a[1].token_ids  # another seed samples apart
    with pytest.raises(ValueError, match="one seed per context"):
        generate_batch(model, [ctx], params, stop_ids=chat.stop_ids, pad_id=chat.pad_id)


def test_a_runner_call_may_sample_hotter_than_the_runner(model_tok):
    from mimesis_rl.models.inference.runner import ModelRunner

    model, tok = model_tok
    ctx = _contexts(tok)[0]
    params = SamplingParams(max_new_tokens=8, do_sample=True, temperature=0.8, retry_temperature_step=0.7)
    runner = ModelRunner(model, tok, params, reuse_cache=False)
    first = runner.generate([ctx], ["k"])[0]
    again = runner.generate([ctx], ["k"], sampling=params.for_attempt(0))[0]
    hot = runner.generate([ctx], ["k"], sampling=params.for_attempt(2))[0]  # temperature 2.2
    assert first.token_ids == again.token_ids and first.logprobs == again.logprobs
    # log-probs are log_softmax(logits / T): a hotter call flattens the first token's distribution
    assert hot.logprobs[0] != first.logprobs[0]
    with pytest.raises(ValueError, match="max_new_tokens"):
        runner.generate([ctx], ["k"], sampling=SamplingParams(max_new_tokens=4, do_sample=True))


def _guard_case(model_tok, index: int, params: SamplingParams, **run):
    """The model, one context, how to generate from it, and the unguarded output to compare with."""
    model, tok = model_tok
    chat = ChatFormat(tok)
    ctx = _contexts(tok)[index]
    run = {"stop_ids": chat.stop_ids, "pad_id": chat.pad_id, **run}
    free = generate_batch(model, [ctx], params, **run)[0]
    return model, chat, ctx, run, free


def test_tag_guard_after_the_close_forbids_every_opening_token(model_tok):
    params = SamplingParams(max_new_tokens=10)
    model, chat, ctx, run, free = _guard_case(model_tok, 0, params)
    close = tuple(ctx[-3:-1])  # the context ends in the close stem + one token (`</think` + `>`)
    favourite = set(free.token_ids) - set(chat.stop_ids) - {close[0]}
    guard = TagGuard(closes=(close,), banned_ids=tuple(sorted(favourite)))
    guarded = generate_batch(model, [ctx], params, guard=guard, **run)[0]
    assert guarded.token_ids != free.token_ids
    assert not set(guarded.token_ids) & favourite
    assert len(guarded.logprobs) == len(guarded.token_ids)


def test_tag_guard_before_the_close_allows_only_the_close_and_not_first(model_tok):
    params = SamplingParams(max_new_tokens=10, do_sample=True, temperature=2.0)  # varied tokens
    model, chat, ctx, run, free = _guard_case(model_tok, 1, params, seeds=[5])
    free = free.token_ids
    assert len(set(free[:3])) == 3, "the test needs three different first tokens"
    # The close spelled by the model's 2nd and 3rd tokens: one reasoning token, then the close.
    opener, second = free[1], free[2]
    banned = ({opener} | set(free[3:])) - {second, free[0]} - set(chat.stop_ids)
    guard = TagGuard(closes=((opener, second),), banned_ids=tuple(sorted(banned)))
    guarded = generate_batch(model, [ctx], params, guard=guard, **run)[0]
    assert guarded.token_ids[:3] == free[:3]  # the close's opener stays allowed inside the reasoning
    assert not set(guarded.token_ids[3:]) & banned  # after the close, the opener is forbidden too
    # Spelled by the first two tokens instead, the close would leave the reasoning empty: refused.
    early = TagGuard(closes=((free[0], free[1]),), banned_ids=(free[0],))
    first = generate_batch(model, [ctx], params, guard=early, **run)[0]
    assert first.token_ids[0] != free[0]


def test_tag_guard_spells_the_close_with_and_without_a_leading_space(model_tok):
    _, tok = model_tok
    guard = TagGuard.for_tag(tok, "</think>", stop_ids=ChatFormat(tok).stop_ids)
    assert tuple(tok.encode("</think", add_special_tokens=False)) in guard.closes
    assert tuple(tok.encode(" </think", add_special_tokens=False)) in guard.closes
    assert not set(guard.banned_ids) & set(ChatFormat(tok).stop_ids)
    assert guard.close_ids == tuple(tok.encode("</think>", add_special_tokens=False))
    assert guard.blank_ids and all(not tok.decode([i]).replace(">", "").strip() for i in guard.blank_ids)
    with pytest.raises(ValueError, match="closing tag"):
        TagGuard(closes=(), banned_ids=())


def test_tag_guard_closes_reasoning_at_its_budget_and_never_stops_inside_it(model_tok):
    params = SamplingParams(max_new_tokens=10)
    model, chat, ctx, _, free = _guard_case(model_tok, 2, params)
    tok = model_tok[1]
    stop = free.token_ids[0]  # make the model's favourite first token a stop: it would end at once
    assert generate_batch(model, [ctx], params, stop_ids=[stop], pad_id=chat.pad_id)[0].token_ids == [stop]
    close_ids = tuple(tok.encode("</think>", add_special_tokens=False))
    guard = TagGuard(closes=(close_ids[:-1],), banned_ids=(), close_ids=close_ids, think_share=0.3,
                     stop_ids=(stop,))
    out = generate_batch(model, [ctx], params, stop_ids=[stop], pad_id=chat.pad_id, guard=guard)[0]
    budget = 3  # 0.3 x 10 new tokens
    assert stop not in out.token_ids[:budget]  # no stop inside the reasoning
    assert tuple(out.token_ids[budget : budget + len(close_ids)]) == close_ids  # closed at the budget
    assert out.forced_close  # reported, so the simulator counts it as a repair, not a clean parse
    assert len(out.logprobs) == len(out.token_ids)


def test_tag_guard_wants_a_visible_message_before_the_turn_may_stop(model_tok):
    params = SamplingParams(max_new_tokens=8)
    model, chat, ctx, _, free = _guard_case(model_tok, 3, params)
    stop, blank = free.token_ids[0], free.token_ids[1]
    close = tuple(ctx[-2:])  # the context ends in the close: the message starts now
    guard = TagGuard(closes=(close,), banned_ids=(), stop_ids=(stop,), blank_ids=(blank,))
    out = generate_batch(model, [ctx], params, stop_ids=[stop], pad_id=chat.pad_id, guard=guard)[0]
    first_visible = next(i for i, t in enumerate(out.token_ids) if t != blank)
    assert stop not in out.token_ids[: first_visible + 1]
    with pytest.raises(ValueError, match="think_share"):
        TagGuard(closes=(close,), banned_ids=(), think_share=0.5)


def test_tag_guard_closes_at_a_sentence_end_within_its_grace_else_says_it_cut(model_tok):
    params = SamplingParams(max_new_tokens=20, do_sample=True, temperature=2.0)  # varied tokens
    model, tok = model_tok
    chat = ChatFormat(tok)
    ctx = _contexts(tok)[2]
    close_ids = tuple(tok.encode("</think>", add_special_tokens=False))
    stop = max(chat.stop_ids)
    run = {"stop_ids": [stop], "pad_id": chat.pad_id, "seeds": [5]}
    free = generate_batch(model, [ctx], params, **run)[0].token_ids
    budget, grace = 5, 5  # 0.25 x 20 each

    def guard(ends: tuple[int, ...]) -> TagGuard:
        return TagGuard(closes=(close_ids[:-1],), banned_ids=(), close_ids=close_ids, think_share=0.25,
                        stop_ids=(stop,), boundary_ids=ends, grace_share=0.25)

    # A "sentence end" the model writes a little past the budget: the close waits for it.
    at = next(j for j in range(budget + 1, budget + grace) if free[j] not in free[:j] + list(close_ids))
    out = generate_batch(model, [ctx], params, guard=guard((free[at],)), **run)[0]
    assert out.token_ids[: at + 1] == free[: at + 1]
    assert tuple(out.token_ids[at + 1 : at + 1 + len(close_ids)]) == close_ids
    assert out.forced_close and not out.cut_mid_sentence
    # No sentence end ever: closed at budget + grace, and the generation says it cut mid-sentence.
    cut = generate_batch(model, [ctx], params, guard=guard((stop,)), **run)[0]
    assert tuple(cut.token_ids[budget + grace : budget + grace + len(close_ids)]) == close_ids
    assert cut.forced_close and cut.cut_mid_sentence


def test_for_tag_knows_the_sentence_ends(model_tok):
    _, tok = model_tok
    guard = TagGuard.for_tag(tok, "</think>", stop_ids=ChatFormat(tok).stop_ids)
    ends = {tok.decode([i]) for i in guard.boundary_ids}
    assert ends and all(e.rstrip(" \"')").endswith((".", "!", "?")) or "\n" in e for e in ends)
