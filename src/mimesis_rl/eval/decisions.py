"""Does a simulator decide like its card? The decision-agreement rate on `simulator.decisions` items.

The number the issue asks to see beside the Turing distance: a simulator can sound human and
still never accept an offer at its own limit. Each item is replayed for the simulator (the agent's
messages of a seeded episode, the simulator's own replies in between), and its reply to the
pending proposal is read as the environment reads it (`reply_accepts`); it agrees when it matches
the card user's decision. An item whose episode ended before the proposal (the simulator left or
accepted something earlier) counts as a disagreement and as `unreached`. Question items give the
answer rate: replies that state every asked slot's value (no credit for withholding here).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mimesis_rl.envs.actions import accept_from_text, reply_accepts
from mimesis_rl.simulator.decisions import DecisionItem, answer_forms, replay_many
from mimesis_rl.simulator.rewards.answers import unanswered


def _rate(hits: Sequence[bool]) -> float | None:
    return round(sum(hits) / len(hits), 4) if hits else None


def decision_accuracy(simulator: Any | Callable[[str], Any],
                      items: Sequence[DecisionItem]) -> dict[str, Any]:
    """Agreement with the card on the proposal items, answer rate on the question items.

    simulator: a `UserSide` (the same one for every domain, e.g. a `UserSimulator`), or a function
    domain -> UserSide or a class taking the domain (scripted users are per domain).
    """
    per_domain: dict[str, list[DecisionItem]] = defaultdict(list)
    for item in items:
        per_domain[item.domain].append(item)
    agree: dict[str, list[bool]] = defaultdict(list)
    answered: dict[str, list[bool]] = defaultdict(list)
    unreached = 0
    for domain, group in sorted(per_domain.items()):
        factory = isinstance(simulator, type) or not hasattr(simulator, "respond")
        user = simulator(domain) if factory else simulator
        for item, (state, reply) in zip(group, replay_many(group, user), strict=True):
            if item.kind == "question":
                if reply is not None:
                    slots = state.goal.slots
                    forms = answer_forms(domain, slots, item.asked_slots)
                    answered[domain].append(not unanswered(reply.message, slots, item.asked_slots, forms))
                else:
                    answered[domain].append(False)
                continue
            unreached += reply is None
            ok = reply is not None and reply_accepts(reply) == bool(item.expected_accept)
            agree[domain].append(ok)
            agree[f"kind:{item.kind}"].append(ok)
    decisions = [x for k, v in agree.items() if not k.startswith("kind:") for x in v]
    answers = [x for v in answered.values() for x in v]
    return {
        "decision_accuracy": _rate(decisions), "decisions": len(decisions), "unreached": unreached,
        "answer_rate": _rate(answers), "questions": len(answers),
        "by_domain": {k: _rate(v) for k, v in sorted(agree.items()) if not k.startswith("kind:")},
        "by_kind": {k.removeprefix("kind:"): _rate(v) for k, v in sorted(agree.items())
                    if k.startswith("kind:")},
        "answer_rate_by_domain": {k: _rate(v) for k, v in sorted(answered.items())},
    }


OWN_WORDS = {True: "yes", False: "no", None: "none"}  # a reply's own verdict, as `reasoning` counts it


def dialogue_decisions(records: Sequence[Mapping[str, Any]], examples: int = 3) -> dict[str, Any]:
    """The decisions a simulator met inside whole dialogues, each against the card user's in the same
    state: the held-out items above are single proposals; this reads the transcripts the environment
    recorded (`EpisodeState.to_record`). For every agent message that the card user, replayed over
    the same agent messages, answers as a proposal (its reply sets `accept`), the simulator's reply
    there is read as the environment read it (`environment_reading`): accepted, declined, or neither
    (which the environment takes as a no). Tells a simulator that turns down what its card accepts
    from one whose reply never says yes or no. `reasoning`: the same replies by the verdict their own
    reasoning states (`verdicts.own_verdict`: yes, no, or none), what `UserSimulator.decide_by_reasoning`
    reads where the message says neither; tells a simulator that decides by its card from one that
    commits to the same verdict whatever the card says.
    """
    from mimesis_rl.simulator.verdicts import own_verdict

    items: dict[str, list[tuple[DecisionItem, str, str]]] = defaultdict(list)
    for record in records:
        turns = record["turns"]
        sent: list[str] = []
        for i, turn in enumerate(turns):
            if turn["role"] != "assistant":
                continue
            sent.append(turn["content"])
            reply = turns[i + 1] if i + 1 < len(turns) and turns[i + 1]["role"] == "user" else None
            if reply is not None:
                item = DecisionItem(record["domain"], int(record["seed"]), tuple(sent), "replay")
                items[record["domain"]].append((item, reply, reply.get("reasoning") or ""))
    tally: dict[str, Counter[str]] = {}
    reasoned: dict[str, Counter[str]] = {}
    shown: dict[str, list[dict[str, str]]] = defaultdict(list)
    for domain, group in sorted(items.items()):
        counts: Counter[str] = Counter()
        own: Counter[str] = Counter()
        cards = replay_many([g[0] for g in group])
        for (item, replied, thought), (_, card) in zip(group, cards, strict=True):
            if card is None or "accept" not in card.meta:
                continue
            verdict = {True: "accepted", False: "declined", None: "neither"}[environment_reading(replied)]
            card_side = "card_accepts" if card.meta["accept"] else "card_declines"
            counts[f"{card_side}:{verdict}"] += 1
            own[f"{card_side}:{OWN_WORDS[own_verdict(thought)]}"] += 1
            if card_side == "card_accepts" and len(shown[domain]) < examples:
                shown[domain].append({"proposal": item.agent_messages[-1], "card": card.message,
                                      "simulator": replied["content"], "read": verdict})
        if counts:
            tally[domain], reasoned[domain] = counts, own

    total: Counter[str] = sum(tally.values(), Counter())
    return {**decision_rates(total), "by_domain": {d: dict(sorted(c.items())) for d, c in tally.items()},
            "rates_by_domain": {d: decision_rates(c) for d, c in tally.items()},
            "card_gap": card_gap(tally),
            "reasoning": {"total": dict(sorted(sum(reasoned.values(), Counter()).items())),
                          "by_domain": {d: dict(sorted(c.items())) for d, c in reasoned.items()},
                          "card_gap": card_gap(reasoned, yes="yes")},
            "examples": dict(shown)}


def card_gap(by_domain: Mapping[str, Mapping[str, int]], yes: str = "accepted") -> dict[str, Any]:
    """Yes where the card accepts minus yes where it declines, from `<card side>:<reading>` counts per
    domain: within each domain, combined with Mantel-Haenszel weights and a bootstrap interval
    (`stats.stratified_rate_difference`; pooled over domains a user that says yes in one domain and no
    in another reads as deciding by its card), the pooled counts beside it. `yes`: the reading that
    counts as yes (`accepted` for the message as the environment read it, `yes` for the reasoning)."""
    from mimesis_rl.stats import stratified_rate_difference

    def side(counts: Mapping[str, int], card: str) -> tuple[int, int]:  # (said yes, proposals)
        prefix = f"card_{card}:"
        return counts.get(prefix + yes, 0), sum(n for k, n in counts.items() if k.startswith(prefix))

    strata = {d: (*side(c, "accepts"), *side(c, "declines")) for d, c in by_domain.items()}
    yes_a, n_a, yes_d, n_d = (sum(v[i] for v in strata.values()) for i in range(4))
    return {**stratified_rate_difference(strata), "yes_where_accepts": [yes_a, n_a],
            "yes_where_declines": [yes_d, n_d]}


def environment_reading(turn: Mapping[str, Any]) -> bool | None:
    """A recorded user turn as the environment read it (`envs.actions.reply_accepts`): the decision the
    user side set (`meta["accept"]`: a scripted user's, or a simulator's own reasoning's when it decides
    by its reasoning), else its message's words; None when the message says neither."""
    accept = (turn.get("meta") or {}).get("accept")
    return accept_from_text(turn.get("content") or "") if accept is None else bool(accept)


def decision_rates(counts: Mapping[str, int]) -> dict[str, Any]:
    """From `<card side>:<reading>` counts: proposals met, agreement with the card (a reply that says
    neither agrees with a card that declines, as the environment reads silence as no), and, where the
    card accepts, the share the simulator accepted and the share it said neither, and where the card
    declines, the share it accepted anyway (an always-yes user scores 1 on both accepted shares)."""
    def share(side: str, verdict: str) -> float | None:
        n = sum(v for k, v in counts.items() if k.startswith(side))
        return round(counts.get(f"{side}:{verdict}", 0) / n, 4) if n else None

    met = sum(counts.values())
    agree = sum(counts.get(k, 0) for k in ("card_accepts:accepted", "card_declines:declined",
                                           "card_declines:neither"))
    return {"proposals": met, "agreement": round(agree / met, 4) if met else None,
            "accepted_when_card_accepts": share("card_accepts", "accepted"),
            "neither_when_card_accepts": share("card_accepts", "neither"),
            "accepted_when_card_declines": share("card_declines", "accepted")}
