"""Numbers that describe a set of reasoning traces: coverage, length, overlap and diversity.

Diversity is the distinct-trigram ratio (distinct word trigrams / all word trigrams over every
trace): 1.0 means no three-word sequence ever repeats; a backend that writes the same sentence for
every turn drifts towards 0. The same ratio over the users' own messages is reported beside it as a
reference (it falls as a corpus grows, so compare the two on the same turns only).
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import fmean
from typing import Any

from mimesis_rl.behavior.reasoning.checks import token_overlap, tokens
from mimesis_rl.data.schema import Conversation


def distinct_ngram_ratio(texts: Iterable[str], n: int = 3) -> float:
    seen: set[tuple[str, ...]] = set()
    total = 0
    for text in texts:
        words = tokens(text)
        for i in range(len(words) - n + 1):
            seen.add(tuple(words[i:i + n]))
            total += 1
    return len(seen) / total if total else 0.0


def trace_metrics(conversations: Iterable[Conversation]) -> dict[str, Any]:
    """Coverage and shape of the traces on user turns."""
    traces: list[str] = []
    messages: list[str] = []
    overlaps: list[float] = []
    user_turns = 0
    for conversation in conversations:
        for turn in conversation.turns:
            if turn.role != "user":
                continue
            user_turns += 1
            messages.append(turn.content)
            if turn.reasoning and turn.reasoning.strip():
                traces.append(turn.reasoning)
                overlaps.append(token_overlap(turn.reasoning, turn.content))
    return {
        "user_turns": user_turns,
        "with_reasoning": len(traces),
        "share_with_reasoning": len(traces) / user_turns if user_turns else 0.0,
        "mean_chars": fmean(len(t) for t in traces) if traces else 0.0,
        "mean_words": fmean(len(t.split()) for t in traces) if traces else 0.0,
        "mean_overlap_with_message": fmean(overlaps) if overlaps else 0.0,
        "distinct_trigram_ratio": distinct_ngram_ratio(traces, 3),
        "message_distinct_trigram_ratio": distinct_ngram_ratio(messages, 3),
        "distinct_traces": len(set(traces)),
    }
