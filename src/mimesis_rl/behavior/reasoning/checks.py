"""Does a reasoning trace merely repeat the user's message?

A private reasoning trace is worth training on only when it says something the message does not:
why the user writes this now. One function decides, so the backends (which fall back on a bad
trace), the tests and the Great Expectations output check all apply the same rule.
"""

from __future__ import annotations

import re

WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Function words carry no content: a trace and a message may share them freely.
_FUNCTION_WORDS = """a an and are as at be but by do for from have i i'm if in is it it's me my of on or so
that the their them they this to was we what with you your not no just"""
STOPWORDS = frozenset(_FUNCTION_WORDS.split())
DEFAULT_MAX_OVERLAP = 0.7
# A quoted message counts as repetition when it makes up at least this share of the trace.
QUOTED_SHARE = 0.5


_FIRST_PERSON = re.compile(r"\b(i|i'm|i'd|i'll|i've|me|my|mine|myself)\b", re.IGNORECASE)
_ABOUT_USER = re.compile(r"\b(the user|user's|users')\b", re.IGNORECASE)
_ASSISTANT_VOICE = re.compile(r"\b(as an ai|language model|chatbot|i'm sorry for any|i apologi[sz]e|"
                              r"how can i (help|assist)|i'm here to (help|assist))\b", re.IGNORECASE)


def voice_problem(text: str) -> str | None:
    """Why a trace is not the user's own voice, or None: it must say "I", not "the user" or "as an AI"."""
    if not _FIRST_PERSON.search(text):
        return "not first person"
    if _ABOUT_USER.search(text):
        return "talks about the user"
    if _ASSISTANT_VOICE.search(text):
        return "speaks as the assistant"
    return None


def tokens(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _normalise(text: str) -> str:
    return " ".join(tokens(text))


def token_overlap(reasoning: str, message: str) -> float:
    """Share of the trace's distinct content words that also occur in the message (0 when none)."""
    words = set(tokens(reasoning))
    content = words - STOPWORDS
    if len(content) >= 3:
        words = content
    if not words:
        return 0.0
    return len(words & set(tokens(message))) / len(words)


def repetition_problem(reasoning: str | None, message: str,
                       max_overlap: float = DEFAULT_MAX_OVERLAP) -> str | None:
    """Why `reasoning` is not a real trace of `message`, or None when it is fine.

    Rejected: a missing or blank trace; one equal to the message (ignoring case, spacing and
    punctuation); one that is a piece of the message; one that is mostly the message quoted; one
    whose content words mostly come from the message (`max_overlap`).
    """
    if reasoning is None or not reasoning.strip():
        return "empty"
    trace, said = _normalise(reasoning), _normalise(message)
    if not trace:
        return "no words"
    if trace == said:
        return "equal to the message"
    if said and f" {trace} " in f" {said} ":
        return "a substring of the message"
    if said and f" {said} " in f" {trace} " and len(said) >= QUOTED_SHARE * len(trace):
        return "mostly the message quoted"
    overlap = token_overlap(reasoning, message)
    if overlap > max_overlap:
        return f"token overlap {overlap:.2f} > {max_overlap:.2f}"
    return None


def repeats_message(reasoning: str | None, message: str, max_overlap: float = DEFAULT_MAX_OVERLAP) -> bool:
    return repetition_problem(reasoning, message, max_overlap) is not None
