"""TRL's fused LM head on CPU scores only the labelled positions once `score_labelled_positions_only`
is on, with the same log-probs, loss, entropy and gradients as when it scores every position."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trl.trainer.utils import add_fused_lm_head

from mimesis_rl.models.testing import make_tiny_base
from mimesis_rl.training.trainers import score_labelled_positions_only


@pytest.fixture
def fused(tmp_path: Path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(make_tiny_base(tmp_path / "tiny"), dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    yield model
    score_labelled_positions_only()  # what every project trainer sets (and other tests expect)


def _pass(model, ids, labels):
    model.zero_grad()
    out = model(input_ids=ids, labels=labels, fused_lm_head=True)
    out.loss.backward()
    grad = model.get_output_embeddings().weight.grad
    return out, grad.clone() if grad is not None else None


def test_only_labelled_positions_are_projected_with_the_same_numbers(fused, monkeypatch) -> None:
    from trl.kernels import ChunkedLogProbFunction

    torch.manual_seed(0)
    vocab = fused.config.vocab_size
    ids = torch.randint(3, vocab, (3, 40))
    labels = ids.clone()
    labels[:, :28] = -100  # a prompt: most positions carry no label, as in simulator SFT
    labels[2, :] = -100  # a fully masked row
    projected: list[int] = []  # rows handed to TRL's chunked projection, per forward
    apply = ChunkedLogProbFunction.apply

    def counting_apply(hidden, *args):
        projected.append(hidden.shape[0])
        return apply(hidden, *args)

    monkeypatch.setattr(ChunkedLogProbFunction, "apply", staticmethod(counting_apply))
    assert score_labelled_positions_only(enabled=False)
    every, every_grad = _pass(fused, ids, labels)
    assert score_labelled_positions_only(enabled=True)
    only, only_grad = _pass(fused, ids, labels)
    valid = int((labels[:, 1:] != -100).sum())
    assert projected == [3 * 39, valid]
    assert torch.allclose(every.loss, only.loss, atol=1e-6)
    for name in ("log_probs", "entropy", "is_top1"):
        assert torch.allclose(getattr(every, name).float(), getattr(only, name).float(), atol=1e-5), name
    assert torch.equal(every.label_mask, only.label_mask)
    if every_grad is not None:
        assert torch.allclose(every_grad, only_grad, atol=1e-6)
