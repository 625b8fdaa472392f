"""Batched generation over many token contexts, with per-token log-probabilities.

Why these choices:

- Contexts are token ids, not text: a multi-turn rollout extends each dialogue token by token, so
  what TRL later re-forwards (prompt + completion) is exactly what the policy conditioned on.
- Left padding plus an attention mask, position ids derived from the mask, so a padded row computes
  the same numbers as the same context alone.
- Our own decoding loop instead of `model.generate`: a row that stops leaves the batch (finished
  rows are dropped from the KV buffer in one copy once they are a quarter of it) instead of being
  decoded as padding until the longest row ends; no per-step processor machinery; the KV cache is a
  preallocated buffer (`kvcache.BufferedLayer`).
- Log-probabilities come from the raw logits of the very forward pass that chose each token (no
  second forward), in fp32, as `log_softmax(logits / temperature)`: the quantity TRL's GRPO
  recomputes as the sampling policy's log-probability.
- Sampling is seeded per row (`sampling.sample_rows`: Gumbel noise hashed from the row's seed, its
  step and the token), so a dialogue's samples depend on its own seed only, never on which other
  dialogues share the batch. This is what lets the batched engine and a one-dialogue-at-a-time loop
  produce the same transcripts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel

from mimesis_rl.models.inference.kvcache import RowCache


@dataclass(frozen=True)
class TagGuard:
    """Decoding rules for a `<think>reasoning</think>message` turn whose prompt already opened `<think>`.

    Inside the reasoning: no tag may open but the close, and the close not before a visible
    reasoning token; the turn may not stop; once `think_share` of `max_new_tokens` is spent the
    close (`close_ids`) is written for the model, at the next sentence end (a `boundary_ids` token)
    within a further `grace_share` of the budget; past that it is written anyway and the generation
    says `cut_mid_sentence` (the simulator re-samples such a turn: a forced close mid-sentence made the
    message continue the reasoning's sentence, "considered. This is the one...").
    After the close (generated, or ending the context): no tag may open, and the turn may not stop
    before the message has a visible token (a `blank_ids` token does not count).

    Why: a 135M simulator trained for minutes skips the structure in every way it can: `</think>`
    then a second `<think>` (no message), `<think>` reopened inside the reasoning, reasoning that runs
    to the token limit, a stop right after `</think>` (measured: 38-45% of demo samples rejected).
    Each is made impossible here instead of re-sampled away. `closes` lists the close's token
    spellings without its last character (`</think` and ` </think` tokenize apart; `>` may merge
    with what follows).
    """

    closes: tuple[tuple[int, ...], ...]
    banned_ids: tuple[int, ...]
    close_ids: tuple[int, ...] = ()
    think_share: float | None = None
    stop_ids: tuple[int, ...] = ()
    blank_ids: tuple[int, ...] = ()
    boundary_ids: tuple[int, ...] = ()
    grace_share: float = 0.25

    def __post_init__(self) -> None:
        if not self.closes or not all(self.closes):
            raise ValueError("TagGuard needs the token ids of the closing tag")
        if self.think_share is not None and not (0 < self.think_share < 1 and self.close_ids):
            raise ValueError("think_share must be in (0, 1) and needs close_ids")

    @classmethod
    def for_tag(cls, tokenizer: Any, close: str, stop_ids: Iterable[int] = (),
                think_share: float | None = 0.5) -> TagGuard:
        """The guard for a closing tag such as `</think>`; `stop_ids` end a turn."""
        stops = tuple(stop_ids)
        stem = close[:-1] if close.endswith(">") else close
        spellings = {tuple(tokenizer.encode(text, add_special_tokens=False)) for text in (stem, " " + stem)}
        tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        texts = [tokenizer.convert_tokens_to_string([tok]) if tok is not None else "" for tok in tokens]
        blank = tuple(i for i, text in enumerate(texts) if tokens[i] is not None and not _visible(text))
        boundary = tuple(i for i, text in enumerate(texts) if _ends_sentence(text))
        return cls(closes=tuple(sorted(spellings)), banned_ids=tag_opening_ids(tokens, stops),
                   close_ids=tuple(tokenizer.encode(close, add_special_tokens=False)),
                   think_share=think_share, stop_ids=stops, blank_ids=blank, boundary_ids=boundary)


def _ends_sentence(text: str) -> bool:
    """A token after which a sentence has ended: it ends in . ! ? (quotes and spaces aside) or breaks
    the line."""
    return "\n" in text or text.rstrip(" \"')").endswith((".", "!", "?"))


def _visible(text: str) -> bool:
    """Text a reader would see as a message: more than whitespace and the close's `>`."""
    return bool(text.replace(">", "").strip())


_TAG_OPENING = re.compile(r"<(?:[A-Za-z/!|]|$)")


def tag_opening_ids(tokens: Sequence[str | None], keep: Iterable[int] = ()) -> tuple[int, ...]:
    """Ids (positions in the vocabulary's token strings) whose text could open a markup tag (`<`,
    `<th`, `</`...), minus `keep`. `<3` and `<=` stay allowed; pass the stop ids as `keep`."""
    kept = set(keep)
    return tuple(i for i, tok in enumerate(tokens) if tok and i not in kept and _TAG_OPENING.search(tok))


@dataclass
class Generation:
    """One row's output: generated ids (up to and including the stop token) and their log-probs."""

    token_ids: list[int]
    logprobs: list[float]
    stopped: bool  # ended on a stop token; False means it ran into max_new_tokens
    cache: RowCache | None = None  # keys/values of the context + generated tokens (when kept)
    forced_close: bool = False  # a `TagGuard` wrote the closing tag at the reasoning budget
    cut_mid_sentence: bool = False  # ... and found no sentence end to write it at

    @property
    def truncated(self) -> bool:
        return not self.stopped


class GuardState:
    """A `TagGuard` applied to a batch of rows, one token at a time; per-row state: closed yet, visible
    message yet, forcing the close (position in `close_ids`, -1 = not). Rows may leave (`keep_rows`) and
    join (`extend`) between steps: the decoding loop refills finished rows' slots."""

    def __init__(self, guard: TagGuard, rows: int, max_new_tokens: int) -> None:
        self.closes = [torch.tensor(close, dtype=torch.long) for close in guard.closes]
        self.tail = max(len(close) for close in guard.closes) + 1
        self.banned = torch.tensor(guard.banned_ids, dtype=torch.long)
        self.openers = torch.tensor(sorted({close[0] for close in guard.closes}), dtype=torch.long)
        self.banned_before = self.banned[~torch.isin(self.banned, self.openers)]
        self.stops = torch.tensor(guard.stop_ids, dtype=torch.long)
        self.blank = torch.tensor(guard.blank_ids, dtype=torch.long)
        self.close_ids = torch.tensor(guard.close_ids, dtype=torch.long)
        self.budget = (max(1, int(max_new_tokens * guard.think_share))
                       if guard.think_share is not None else None)
        self.boundary = torch.tensor(guard.boundary_ids, dtype=torch.long)
        self.grace = int(max_new_tokens * guard.grace_share) if len(self.boundary) else 0
        self.after_close = torch.zeros(rows, dtype=torch.bool)
        self.cut = torch.zeros(rows, dtype=torch.bool)  # closed past the grace, mid-sentence
        self.reasoned = torch.zeros(rows, dtype=torch.bool)  # a visible token inside the reasoning
        self.visible = torch.zeros(rows, dtype=torch.bool)  # a visible token after the close
        self.forcing = torch.full((rows,), -1, dtype=torch.long)

    _ROW_STATE = ("after_close", "reasoned", "visible", "forcing", "cut")

    def keep_rows(self, index: torch.Tensor) -> None:
        for name in self._ROW_STATE:
            setattr(self, name, getattr(self, name).index_select(0, index))

    def extend(self, other: GuardState) -> None:
        """Append `other`'s rows (same guard) after this batch's."""
        for name in self._ROW_STATE:
            setattr(self, name, torch.cat([getattr(self, name), getattr(other, name)]))

    @staticmethod
    def _mask(scores: torch.Tensor, rows: torch.Tensor, banned: torch.Tensor) -> None:
        if rows.any() and len(banned):
            index = rows.nonzero().squeeze(1).to(scores.device)
            scores[index.unsqueeze(1), banned.to(scores.device).unsqueeze(0)] = float("-inf")

    def __call__(self, ids: torch.Tensor, scores: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        """`ids`: each row's last tokens (context, then generated; CPU); `steps`: tokens each row has
        generated so far; `scores` masked in place."""
        last = ids[:, -1]
        generated = steps > 0  # a generated token counts once it is visible
        shown = generated & ~torch.isin(last, self.blank)
        self.visible |= self.after_close & shown
        self.reasoned |= ~self.after_close & shown & ~torch.isin(last, self.openers)
        for close in self.closes:
            for shift in (0, 1):  # the stem may be followed by one token (`>`) in the context
                end = ids.shape[1] - shift
                if end >= len(close):
                    self.after_close |= (ids[:, end - len(close) : end] == close).all(dim=1)
        inside = ~self.after_close
        self._mask(scores, self.after_close, self.banned)
        self._mask(scores, self.after_close & ~self.visible, self.stops)
        self._mask(scores, inside, self.banned_before)
        self._mask(scores, inside, self.stops)
        self._mask(scores, inside & ~self.reasoned, self.openers)  # no empty reasoning
        if self.budget is not None:
            spent = inside & (self.forcing < 0) & ~torch.isin(last, self.openers) & (steps >= self.budget)
            if self.grace:  # close at a sentence end; past the grace, anyway (and say so)
                at_end = generated & torch.isin(last, self.boundary)
                late = steps >= self.budget + self.grace
                self.cut |= spent & late & ~at_end
                spent &= at_end | late
            self.forcing[spent] = 0
            active = (self.forcing >= 0) & (self.forcing < len(self.close_ids))
            for row in active.nonzero().squeeze(1).tolist():
                token = int(self.close_ids[self.forcing[row]])
                keep = scores[row, token].clone()
                scores[row] = float("-inf")
                scores[row, token] = keep if torch.isfinite(keep) else 0.0
                self.forcing[row] += 1
        return scores


def contiguous_lm_head(model: PreTrainedModel | Any) -> None:
    """Make the output projection's input contiguous, once per model (idempotent).

    Why: Llama computes logits for `hidden[:, -1:, :]`, a non-contiguous slice; when the weights do
    not require grad, that matmul falls back to a `bmm` which copies the transposed 49152 x 576 head
    once per row (measured: 1.5 s of a 3.5 s prefill of 16 rows, ~2.6 GB of temporaries at batch 47).
    A contiguous input takes the plain GEMM. Harmless for training (already contiguous there).
    """
    head = model.get_output_embeddings()
    if head is None or getattr(head, "_mimesis_contiguous", False):
        return
    head.register_forward_pre_hook(lambda _module, args: tuple(a.contiguous() for a in args))
    head._mimesis_contiguous = True


@dataclass
class Request:
    """One continuation to generate: a token context, its sampling seed, the KV cache of a prefix of
    the context (from an earlier round), and a temperature for this request alone (a re-sample's)."""

    context: Sequence[int]
    seed: int | None = None
    cache: RowCache | None = None
    temperature: float | None = None
