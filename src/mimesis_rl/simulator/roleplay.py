"""Does a message sound like the user, or like an assistant stepping out of the user's role? The one
definition of a role break, for the runtime and for the measures.

One table, `ROLE_RULES`: each rule is a kind, a test, and its two possible uses:
- `resample`: the runtime (`UserSimulator`) re-samples a turn that shows it and ends the session when
  every sample does (`role_break`, counted in `ParseStats.role_breaks`). Hard failures no real user
  writes: "as an AI", offers of help, narrating "the user", the card's instructions or the opening cue
  said back (the paper's appendix F.3 failure mode);
- `penalty`: the role-adherence reward (`role_score`), the discriminator's style features and the
  fidelity evaluation's role-adherence and refusal rates (`role_violations`, `is_refusal`) measure it.
  Softer signs, some of which a real user may show: a list, markdown, a long message, "feel free to".

The two uses do not cover the same rules (issue 26 found them defined twice, in `simulator.format` and
here): the runtime rejects the card and cue echoes and narration that the reward does not measure, and
the reward measures lists, markdown, length and assistant phrases ("feel free to", "here are some") the
runtime lets through. Joining them would change both what the runtime re-samples and what the reward
and the Fidelity Index measure (the golden test's role probes show where), so each rule states which
uses it has; moving a rule from one use to both is a decision, not a refactor.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


def _matches(pattern: re.Pattern[str]) -> Callable[[str, int], bool]:
    return lambda message, max_words: bool(pattern.search(message))


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


@dataclass(frozen=True)
class RoleRule:
    """One sign of a message out of the user's role. test(message, max_words) -> shows it.
    resample: the runtime re-samples it; penalty: what the role measure takes off (0: not measured)."""

    kind: str
    test: Callable[[str, int], bool]
    resample: bool = False
    penalty: float = 0.0


# In order: `role_break` names the first re-sampled rule a message shows, `role_violations` lists the
# measured ones in this order.
ROLE_RULES: tuple[RoleRule, ...] = (
    # -- re-sampled by the runtime ---------------------------------------------------------------
    RoleRule("as_an_ai", _matches(re.compile(
        r"\b(as an ai|an ai (language )?model|a language model|"
        r"i'?m an? (ai|assistant|chatbot|virtual assistant)|"
        r"i am an? (ai|assistant|chatbot|virtual assistant))\b", re.I)), resample=True),
    RoleRule("offers_help", _matches(re.compile(
        r"\b(how (can|may) i (help|assist)( you)?|i('?d| would) be (happy|glad) to "
        r"(help|assist)|is there anything (else )?i can (help|do)|let me know (how|if) "
        r"i can help|i can help you with)\b", re.I)), resample=True),
    RoleRule("cannot_comply", _matches(re.compile(
        r"\b(i (can'?t|cannot|am unable to|'m unable to) (assist|help|provide|"
        r"fulfil|fulfill|comply)( with)? (that|this|your request))\b", re.I)), resample=True),
    RoleRule("narrates_user", _matches(re.compile(
        r"\b(the user('s)? (wants|says|said|feels|is asking|asks|would|might|"
        r"needs|has|had|is|was|will|just|ends|ended|finished))\b|"
        r"\b(as the user|playing the user|role-?play)\b", re.I)), resample=True),
    # The card's own instructions said back (the prompt leaking into the chat): no user writes these.
    # Real users: 0 of 28,517 demo turns and 0 of 14,297 CaSiNo messages.
    RoleRule("echoes_card", _matches(re.compile(
        r"\b(end (your|the|their|my) messages? with|end it with|think privately|"
        r"stay in character|(your|my|the) message ended (by|with)|"
        r"when (you|i) want to leave|"
        r"you are a real person|write only (your|the user's|my) (next )?message|"
        r"how you behave:|rather not say; reveal|the one who wants something)", re.I)), resample=True),
    # The opening cue (`[chat opened]`) taken as text: the cue's bracketed form or talk of the chat
    # starting or of "my first message". Real users: 0 of 799 openings, 0 of 28,517 turns.
    RoleRule("echoes_cue", _matches(re.compile(
        r"\[chat\b|\bchat (opened|closed)\b|\bfirst message\b|"
        r"\b(conversation|chat) (starts|started|begins|began)\b", re.I)), resample=True),
    # -- measured (reward, discriminator features, fidelity) ------------------------------------
    RoleRule("refusal", _matches(_REFUSAL), penalty=1.0),
    RoleRule("assistant_phrase", _matches(_ASSISTANT), penalty=0.6),
    RoleRule("list", lambda message, max_words: len(_LIST_ITEM.findall(message)) >= 2, penalty=0.3),
    RoleRule("markdown", _matches(_MARKDOWN), penalty=0.2),
    RoleRule("too_long", lambda message, max_words: len(message.split()) > max_words, penalty=0.2),
)
_RESAMPLED = tuple(r for r in ROLE_RULES if r.resample)
_MEASURED = tuple(r for r in ROLE_RULES if r.penalty)


def role_break(message: str) -> str | None:
    """The kind of role break the runtime re-samples that a message shows (the first in `ROLE_RULES`),
    or None."""
    for rule in _RESAMPLED:
        if rule.test(message, 0):
            return rule.kind
    return None


def is_refusal(message: str) -> bool:
    """The model refuses to play the user (breaks character)."""
    return bool(_REFUSAL.search(message))


def role_violations(message: str, max_words: int = 80) -> list[str]:
    """Why a message sounds like an assistant rather than a user, as the role measures see it (empty
    list: it does not)."""
    return [rule.kind for rule in _MEASURED if rule.test(message, max_words)]


_PENALTY = {rule.kind: rule.penalty for rule in _MEASURED}


def role_score(message: str, max_words: int = 80) -> float:
    """1 minus the penalties of the measured violations, floored at 0 (the role-adherence reward)."""
    return max(0.0, 1.0 - sum(_PENALTY[v] for v in role_violations(message, max_words)))
