"""A loss weight on one span of an SFT example: the few tokens a decision turns on count more.

Why: a simulator reply to a proposal is ~60 trained tokens, and the one that decides it (" within" or
" over" after "so $420 is") is one of them. Under the mean token loss that token's gradient is 1/N of
the batch's, and every SFT route left it at chance while the reasoning around it was learned
(benchmarks/verdict_probe.py); with the loss on that token alone the same base learned it in 25-50
steps. Here an example names the text whose tokens should weigh more (`weighted_span`, a substring of
its last trained message); the collator finds those tokens and the loss multiplies their
log-probabilities by `weight`, normalised by the token count as before, so every other token keeps
its place in the loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

SPAN_COLUMN = "weighted_span"
LAST_TURN_COLUMN = "last_turn_only"  # true: the example's earlier trained turns are context, not targets
WEIGHTS_KEY = "loss_weights"


def last_run_start(labels: Sequence[int]) -> int:
    """Where the last run of trained tokens (labels other than -100) begins: the last trained message."""
    end = max((i for i, label in enumerate(labels) if label != -100), default=-1)
    start = end
    while start > 0 and labels[start - 1] != -100:
        start -= 1
    return max(start, 0)


def span_start(input_ids: Sequence[int], labels: Sequence[int], span_ids: Sequence[int]) -> int | None:
    """Where `span_ids` last occurs in `input_ids` with every one of its tokens trained, else None."""
    n, wanted = len(span_ids), list(span_ids)
    if not n:
        return None
    for start in range(len(input_ids) - n, -1, -1):
        if list(input_ids[start : start + n]) == wanted and all(
                label != -100 for label in labels[start : start + n]):
            return start
    return None


class SpanWeightCollator(DataCollatorForLanguageModeling):
    """TRL's language-modeling collator, plus `loss_weights`: `weight` on the tokens of each example's
    `weighted_span`, 1 elsewhere. Counts the spans asked for and found (a span the tokenizer splits
    differently in context, or cut by `max_length`, is not found: `found` < `asked` says so). Padded
    rows only: TRL refuses a custom collator with padding-free batches (`packing: bfd`).

    An example with `last_turn_only` set trains its last simulator message alone: the turns before it
    keep their place as context and lose their labels (`simulator.onpolicy`: the simulator's own turns
    before a relabelled decision)."""

    def __init__(self, pad_token_id: int, tokenizer: Any, weight: float, **kwargs: Any) -> None:
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.tokenizer = tokenizer
        self.weight = float(weight)
        self.asked = 0
        self.found = 0
        self._ids: dict[str, list[int]] = {}

    def _span_ids(self, span: str) -> list[int]:
        if span not in self._ids:
            self._ids[span] = self.tokenizer(span, add_special_tokens=False).input_ids
        return self._ids[span]

    def weights(self, example: dict[str, Any]) -> torch.Tensor:
        ids = example["input_ids"]
        out = torch.ones(len(ids))
        span = example.get(SPAN_COLUMN) or ""
        if span:
            self.asked += 1
            span_ids = self._span_ids(span)
            start = span_start(ids, example.get("labels", ids), span_ids)
            if start is not None:
                self.found += 1
                out[start : start + len(span_ids)] = self.weight
        return out

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        output = super().torch_call(examples)
        for row, example in enumerate(examples):
            if example.get(LAST_TURN_COLUMN):
                output["labels"][row, : last_run_start(example.get("labels", example["input_ids"]))] = -100
        if not any(example.get(SPAN_COLUMN) for example in examples):
            return output
        weights = torch.ones(output["input_ids"].shape)  # padding (and pad_to_multiple_of) carries no label
        for row, example in enumerate(examples):
            example_weights = self.weights(example)
            weights[row, : len(example_weights)] = example_weights
        output[WEIGHTS_KEY] = weights
        return output


class SpanWeightedLoss:
    """Trainer mixin (over TRL's `SFTTrainer`): the batch's `loss_weights` scale the per-token
    log-probabilities TRL's fused LM head returns, before TRL sums them into the loss and its metrics
    (entropy and token accuracy are not weighted). A batch without weights is TRL's own loss."""

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()  # type: ignore[misc]
        kept = self._signature_columns  # type: ignore[attr-defined]
        self._signature_columns = [*kept, *(c for c in (SPAN_COLUMN, LAST_TURN_COLUMN) if c not in kept)]

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        weights = inputs.pop(WEIGHTS_KEY, None)
        if weights is None:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)  # type: ignore[misc]

        def scale(module: Any, args: Any, kwargs: dict[str, Any], output: Any) -> Any:
            if kwargs.get("fused_lm_head") and getattr(output, "log_probs", None) is not None:
                shifted = weights[:, 1:] if "shift_labels" not in kwargs else weights
                output.log_probs = output.log_probs * shifted.to(output.log_probs)
            return output

        handle = model.register_forward_hook(scale, with_kwargs=True)
        try:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)  # type: ignore[misc]
        finally:
            handle.remove()


def with_span_weights(trainer_cls: type) -> type:
    """`trainer_cls` (an `SFTTrainer`) whose loss reads the collator's `loss_weights`."""
    return type(f"SpanWeighted{trainer_cls.__name__}", (SpanWeightedLoss, trainer_cls),
                {"__doc__": f"{trainer_cls.__name__}; tokens of an example's weighted span weigh more."})


def span_weighted(trainer_cls: type, config: Any, tokenizer: Any, weight: float,
                  where: str) -> tuple[type, dict[str, Any]]:
    """(`trainer_cls` whose loss reads span weights, its `data_collator` keyword): what an SFT stage
    whose rows carry `weighted_span` / `last_turn_only` builds its trainer with. `where` names the
    stage in the error for padding-free batches (TRL takes no custom collator there)."""
    if config.packing or config.padding_free:
        raise ValueError(f"{where}: weighted spans need padded batches (TRL takes no custom collator when "
                         "padding-free); set trainer.packing: false")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    collator = SpanWeightCollator(pad, tokenizer, weight, pad_to_multiple_of=config.pad_to_multiple_of)
    return with_span_weights(trainer_cls), {"data_collator": collator}
