"""The verdict a simulator's own reasoning reached on a pending proposal, and the decision it implies.

A small simulator often reaches its card's verdict in its reasoning and then writes a message that
says neither yes nor no ("…, so $691 is within my limit: I'll take it." → "I'm happy with the
price."); the environment would read that as a no. `own_verdict` reads the reasoning in the card
users' words (act first or facts first); `reasoned_decision` turns it into the `meta["accept"]` a
scripted user's decision travels in, which `UserSimulator.decide_by_reasoning`, the decision reward
(`sim_rl.decide_by_reasoning`) and `eval.dialogue_decisions` read.
"""

from __future__ import annotations

import re
from typing import Any

from mimesis_rl.envs.actions import accept_from_text
from mimesis_rl.simulator.decision_windows import ACT_OPEN, VERDICT_CUE

# The verdict a user's own reasoning ends on, in the card users' words ("…, so $410 is within my limit:
# I'll take it.", "…, so 19 is short of it: I'll counter."): the act after the colon when there is one,
# else the clause (a small model often stops at "so $180 is within my limit.").
_DECLINE_ACT = re.compile(r"\bi'?ll (?:counter|turn it down|say no|pass)\b|\bbut i can still\b",
                          re.IGNORECASE)
_ACCEPT_ACT = re.compile(r"\bi'?ll (?:take|book|watch|buy) it\b", re.IGNORECASE)
_DECLINE_CLAUSE = re.compile(
    r"\b(?:over my|short|wrong|it'?s out|doesn'?t fit|does not fit|too (?:much|high))\b", re.IGNORECASE)
_ACCEPT_CLAUSE = re.compile(r"\b(?:within my limit|is enough|it matches|it fits)\b", re.IGNORECASE)


def own_verdict(reasoning: str) -> bool | None:
    """True / False when the reasoning's act (opening it, verdict first: "I'll take it: they offer
    …") or else its last "so …" clause accepts / declines the proposal, None when it states no verdict."""
    head = reasoning.lstrip()
    if head.startswith(ACT_OPEN):  # its first clause: a model's act may end on "." or ";" ("I'll book it.")
        act = re.split(r"[:.;]", head, maxsplit=1)[0]
        for pattern, verdict in ((_DECLINE_ACT, False), (_ACCEPT_ACT, True)):
            if pattern.search(act):
                return verdict
    cut = reasoning.rfind(VERDICT_CUE)
    if cut < 0:
        return None
    tail = reasoning[cut + len(VERDICT_CUE):]
    for pattern, verdict in ((_DECLINE_ACT, False), (_ACCEPT_ACT, True), (_DECLINE_CLAUSE, False),
                             (_ACCEPT_CLAUSE, True)):
        if pattern.search(tail):
            return verdict
    return None


def reasoned_decision(reasoning: str, message: str) -> dict[str, Any]:
    """The decision a reply's own reasoning reached, as `meta["accept"]`, where its message says neither
    yes nor no (the environment would read that as a no); {} otherwise.

    Why: in bargain, on-policy relabelling taught the simulator to reach the card's verdict in its
    reasoning ("…, so $691 is within my limit: I'll take it.") and its message then dropped it ("I'm
    happy with the price."); a scripted user's decision travels the same way, in `meta["accept"]`, and
    the environment reads it only while a proposal is pending. A message that says yes or no keeps it.
    """
    verdict = own_verdict(reasoning or "")
    if verdict is None or accept_from_text(message or "") is not None:
        return {}
    return {"accept": verdict, "decided_by": "reasoning"}


def turn_meta(turn: Any, decide_by_reasoning: bool = False) -> dict[str, Any]:
    """A valid `ParsedTurn`'s `UserReply.meta`: the repairs its parse made and, for a simulator that
    decides by its reasoning, the decision that reasoning reached. One place, so a session turn
    (`UserSimulator.respond`) and a stateless one (the server's `reply`) carry the same."""
    meta: dict[str, Any] = {"repairs": list(turn.repairs)} if turn.repairs else {}
    if decide_by_reasoning:
        meta.update(reasoned_decision(turn.reasoning, turn.message))
    return meta
