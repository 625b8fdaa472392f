"""Dialogue acts that mean the same in any domain: who proposes what to whom, who declines, who complains.

The `embedding` labeler's words and the `rules` lexicons are tied to the phrasing of the corpora
they were built on; a counter-offer in a camping negotiation ("I'll take 2 water and you can keep
the firewood") shares no price or deal word with one in a car sale. These flags look at the
structure instead: an allocation between "I" and "you", a conditional trade, a request for a share,
a statement of need, a decline, a complaint about the other side's last turn. They are read from
the user's message and from the agent turn before it (what was on the table), and the trained
labeler learns how much each one is worth for each pattern. They were written from the issue's
description of the misses (counter-offers without price words, refusals that restate a need,
complaints about the previous answer), not fitted to any data.
"""

from __future__ import annotations

import re

from mimesis_rl.behavior.labelers import lexicon as lx

_I = r"(?:i|we|me|us)"
_YOU = r"(?:you|u|y'all)"
_GETS = (
    r"(?:'ll |\s+will |\s+would |\s+could |\s+can |\s+)?(?:get|take|keep|have|receive|give|offer|trade|do)\b"
)
_QUANTITY = (
    r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|half|all|both|none|more|most|extra|"
    r"some|any|the rest|everything)\b"
)

ALLOCATION = re.compile(
    rf"\b{_I}{_GETS}.{{0,80}}\b{_YOU}{_GETS}|\b{_YOU}{_GETS}.{{0,80}}\b{_I}{_GETS}", re.IGNORECASE
)
CONDITIONAL = re.compile(
    rf"\bif {_YOU}\b.{{0,80}}\b{_I}(?:'ll| will| would| can| could)\b|"
    rf"\bif {_I}\b.{{0,80}}\b{_YOU}(?:'ll| will| would| can| could)\b|"
    rf"\b{_I}{_GETS}.{{0,80}}\bif\b|\bif {_I} (?:can|could|may|get|take|keep|have)\b|"
    r"\bin (?:exchange|return)\b|\bas long as\b|\bonly if\b|\bprovided\b|\bunless\b|"
    r"\b(?:give|trade|swap|exchange|offer)\b.{0,40}\bfor\b",
    re.IGNORECASE,
)
ASK_SHARE = re.compile(
    rf"\b(?:can|could|may|might) {_I} (?:have|get|take|keep|do)\b|\bhow about\b|\bwhat (?:if|about)\b|"
    rf"\bwould {_YOU} (?:be (?:willing|ok|okay|open)|accept|agree|take|consider|mind|do)\b|"
    r"\b(?:let'?s|lets) (?:do|say|split|make|go with)\b|\bmeet (?:me )?in the middle\b|\bsplit\b",
    re.IGNORECASE,
)
NEED = re.compile(
    rf"\b{_I} (?:really |still |also |just |definitely |do |would )?(?:need|want|require|must have|"
    r"would like|'d like|can'?t (?:go|do|live|manage) without|am (?:hoping|looking) (?:for|to))\b|"
    r"\bi'?d (?:really )?(?:like|love|prefer)\b|\b(?:is|are) (?:essential|important|crucial|a must)\b",
    re.IGNORECASE,
)
DECLINE = re.compile(
    r"^\W*(?:no|nope|nah|sorry)\b|\b(?:i|we) (?:can'?t|cannot|won'?t|will not|couldn'?t|"
    r"am not (?:able|willing)|'m not (?:able|willing)|don'?t (?:think|want|agree))\b|"
    r"\b(?:won'?t|wouldn'?t|doesn'?t|does not|will not) (?:work|be enough|do)\b|"
    r"\bnot (?:enough|fair|possible|an option|going to work|really)\b|\bi'?d rather\b|\btoo (?:much|little|"
    r"low|high|expensive|many|few)\b|\bleaves? me with\b|\bpass\b|\bno thanks?\b|\bno deal\b",
    re.IGNORECASE,
)
COMPLAINT = re.compile(
    r"\byou (?:didn'?t|did not|don'?t|do not|never|keep|just|already|still|aren'?t|are not|"
    r"haven'?t|can'?t even)\b|\byour (?:answer|reply|offer|suggestion|response|advice|service)\b|"
    r"\bnot what i (?:asked|said|meant|wanted)\b|\b(?:doesn'?t|does not|didn'?t|did not) (?:help|answer|"
    r"make sense)\b|\bmakes no sense\b|\bthat'?s (?:wrong|not (?:right|true|fair|helpful|what))\b|"
    r"\b(?:useless|unhelpful|ridiculous|unreasonable|rude|greedy|selfish|unfair)\b",
    re.IGNORECASE,
)
QUANTITY = re.compile(_QUANTITY, re.IGNORECASE)

ACTS = (
    ("allocation", ALLOCATION),
    ("conditional", CONDITIONAL),
    ("ask_share", ASK_SHARE),
    ("need", NEED),
    ("decline", DECLINE),
    ("complaint", COMPLAINT),
)
USER_ACTS = tuple(name for name, _ in ACTS) + ("quantity",)
AGENT_ACTS = ("allocation", "conditional", "ask_share", "need", "decline")


def acts(text: str | None, which: tuple[str, ...] = USER_ACTS) -> list[float]:
    """1.0 / 0.0 for each act of `which`, in that order (an empty text has none)."""
    text = lx.normalise(text or "")
    found = {name: bool(rx.search(text)) for name, rx in ACTS if name in which}
    if "quantity" in which:
        found["quantity"] = bool(QUANTITY.search(text))
    return [1.0 if found[name] else 0.0 for name in which]
