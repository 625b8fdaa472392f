"""Chat-template arithmetic on token ids: first prompt, and the tokens that add messages after a turn.

A multi-turn rollout never re-tokenizes what a model generated. It renders the first prompt with
the chat template, then extends the ids with (generated tokens) + (template tokens of the next
messages + generation prompt). The "next messages" ids come from TRL's trick: render a dummy
chat with and without the new messages and keep the difference, cut at the end-of-turn token
that generation stops on. This needs a prefix-preserving template (ours, ChatML, is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

# A closed exchange to render before the messages of interest: the difference is what they add.
DUMMY_CHAT = ({"role": "user", "content": "dummy"}, {"role": "assistant", "content": "dummy"})


def template_ids(tokenizer: Any, messages: Sequence[Mapping[str, str]], generation_prompt: bool) -> list[int]:
    """The chat template's token ids for `messages` (the one place the project renders one; the rollout
    engine, CSD's note splicing and the TRL adapter diff these)."""
    out = tokenizer.apply_chat_template(
        [dict(m) for m in messages], tokenize=True, add_generation_prompt=generation_prompt, return_dict=False
    )
    return list(out["input_ids"] if isinstance(out, Mapping) else out)


@dataclass
class ChatFormat:
    """One tokenizer's chat template as token operations, plus the ids that stop a turn."""

    tokenizer: PreTrainedTokenizerBase
    end_of_turn_id: int = field(init=False)
    stop_ids: tuple[int, ...] = field(init=False)
    pad_id: int = field(init=False)

    def __post_init__(self) -> None:
        tok = self.tokenizer
        if not getattr(tok, "chat_template", None):
            raise ValueError(
                f"tokenizer {tok.name_or_path!r} has no chat template; the rollout engine needs one"
            )
        if tok.eos_token_id is None:
            raise ValueError(f"tokenizer {tok.name_or_path!r} has no eos token to stop a turn on")
        self.end_of_turn_id = int(tok.eos_token_id)
        stops = [self.end_of_turn_id]
        vocab = tok.get_vocab()
        for name in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
            if name in vocab and vocab[name] not in stops:
                stops.append(vocab[name])
        self.stop_ids = tuple(stops)
        self.pad_id = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
        # Fail now, not mid-rollout, when the template cannot be extended token by token.
        self.continuation_ids([{"role": "user", "content": "check"}])

    def prompt_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """The whole chat so far plus the generation prompt (the first context of a dialogue)."""
        return template_ids(self.tokenizer, messages, generation_prompt=True)

    def continuation_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Ids that follow a finished assistant turn (ending on end_of_turn_id): `messages`, then the
        generation prompt for the next assistant turn."""
        prefix = template_ids(self.tokenizer, DUMMY_CHAT, generation_prompt=False)
        ends = [i for i, tok in enumerate(prefix) if tok == self.end_of_turn_id]
        if not ends:
            raise ValueError(
                "the chat template does not close an assistant turn with the eos token "
                f"({self.tokenizer.eos_token!r}); cannot extend dialogues token by token"
            )
        prefix = prefix[: ends[-1] + 1]
        full = template_ids(self.tokenizer, [*DUMMY_CHAT, *messages], generation_prompt=True)
        if full[: len(prefix)] != prefix:
            raise ValueError(
                "the chat template is not prefix preserving: rendering more messages changed "
                "the earlier tokens, so a dialogue cannot be extended token by token"
            )
        return full[len(prefix) :]

    def decode(self, ids: Sequence[int]) -> str:
        """A turn's text as the other party sees it (special tokens such as the end of turn dropped)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)
