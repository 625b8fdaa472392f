"""What every reward shares: TRL's reward-function signature and the parsed simulator output.

A reward function is `f(prompts, completions, **columns) -> list[float | None]` (TRL's
`GRPOTrainer` passes the dataset's other columns as keyword lists); `None` means "does not apply
to this row" and TRL leaves it out of the weighted sum.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from mimesis_rl.simulator.format import ParsedTurn, parse_output

RewardFunc = Callable[..., list[float | None]]


def completion_text(completion: str | Sequence[dict[str, Any]]) -> str:
    """Raw text of one completion, plain (`str`) or conversational (list of messages)."""
    if isinstance(completion, str):
        return completion
    return "".join(str(m.get("content", "")) for m in completion if m.get("role", "assistant") == "assistant")


@lru_cache(maxsize=4096)
def _parse_cached(text: str) -> ParsedTurn:
    return parse_output(text)


def parse_completions(completions: Sequence[Any]) -> list[ParsedTurn]:
    """Parse each completion once per distinct text (every reward asks for the same parse)."""
    return [_parse_cached(completion_text(c)) for c in completions]


def column(kwargs: dict[str, Any], name: str, n: int, default: Any = None) -> list[Any]:
    """A dataset column passed by TRL, or `default` for every row when the dataset lacks it."""
    values = kwargs.get(name)
    if values is None:
        return [default] * n
    if len(values) != n:
        raise ValueError(f"reward column {name!r} has {len(values)} values for {n} completions")
    return list(values)


def named(name: str) -> Callable[[RewardFunc], RewardFunc]:
    """Give a reward closure a stable name (TRL logs `rewards/<__name__>`)."""
    def wrap(fn: RewardFunc) -> RewardFunc:
        fn.__name__ = name
        fn.__qualname__ = name
        return fn
    return wrap
