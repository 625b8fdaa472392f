"""Does a message sound like the user, or like an assistant stepping out of the user's role?

Shared by the role-adherence reward, the discriminator's style features and the fidelity
evaluation (role-adherence rate, refusal rate).
"""

from __future__ import annotations

import re

_ASSISTANT = re.compile(
    r"\b(as an ai|as a language model|i'?m an ai|i am an ai|language model|virtual assistant|"
    r"how (can|may) i (help|assist)|what can i do for you|i('?d| would) be (happy|glad) to help|"
    r"i can help you|happy to help|is there anything else|let me know if you (need|have)|"
    r"feel free to|here are (some|a few)|i hope this helps|great question)\b",
    re.IGNORECASE,
)
_REFUSAL = re.compile(
    r"\b(i can(no|')t (pretend|role-?play|act as|play)|"
    r"i('?m| am) (not able|unable) to (pretend|role-?play|act)|"
    r"i('?m| am) sorry,? but i can(no|')t|i won'?t (pretend|role-?play)|as the user,? i|"
    r"i('?m| am) (just )?(a|an) (ai|assistant|chatbot))\b",
    re.IGNORECASE,
)
_LIST_ITEM = re.compile(r"(?m)^\s*(?:[-*\u2022]|\d+[.)])\s+\S")
_MARKDOWN = re.compile(r"(\*\*[^*]+\*\*|^#{1,6}\s)", re.MULTILINE)


def is_refusal(message: str) -> bool:
    """The model refuses to play the user (breaks character)."""
    return bool(_REFUSAL.search(message))


def role_violations(message: str, max_words: int = 80) -> list[str]:
    """Why a message sounds like an assistant rather than a user (empty list: it does not)."""
    found = []
    if is_refusal(message):
        found.append("refusal")
    if _ASSISTANT.search(message):
        found.append("assistant_phrase")
    if len(_LIST_ITEM.findall(message)) >= 2:
        found.append("list")
    if _MARKDOWN.search(message):
        found.append("markdown")
    if len(message.split()) > max_words:
        found.append("too_long")
    return found


_PENALTY = {"refusal": 1.0, "assistant_phrase": 0.6, "list": 0.3, "markdown": 0.2, "too_long": 0.2}


def role_score(message: str, max_words: int = 80) -> float:
    return max(0.0, 1.0 - sum(_PENALTY[v] for v in role_violations(message, max_words)))
