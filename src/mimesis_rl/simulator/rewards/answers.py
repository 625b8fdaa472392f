"""Answers what was asked: a reply to a question about a slot states that slot's value.

The measured failure: asked for its budget, the simulator talks about something else, and the
agent never learns what it needs. The row's `asked_slots` are the slots the agent's message asks
about, as the domain's scripted user reads a question (`UserPolicy.asked_slots`). The reply
answers a slot when it mentions the card's value (`slots.mentions`, the test paced disclosure and
goal pursuit use) or the domain's own phrasing of it (the row's `answer_forms`: "something fun and
easy" states the mood `light`), or, for a slot the card keeps private, when it declines it the way
people do and the taxonomy names `privacy_concern` ("I'd rather not say", "why do you need that?"),
detected by the behaviour labeler that pattern fidelity uses. `withholding_info` earns nothing: by definition
its detector fires on any reply that leaves the question unanswered, an unrelated one included, so
paying for it would pay the very failure this reward targets. A public slot must be answered: the
card gives no reason to keep it back. 1 when every asked slot is answered, else 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mimesis_rl.data.schema import Turn
from mimesis_rl.simulator.rewards.common import RewardFunc, column, named, parse_completions
from mimesis_rl.simulator.rewards.fidelity import PatternPredictor
from mimesis_rl.simulator.rewards.slots import load_slots, mentions

HUMAN_WITHHOLDING = ("privacy_concern",)
THRESHOLD = 0.5


def unanswered(message: str, slots: dict[str, Any], asked: Sequence[str],
               forms: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """The asked slots whose value the message does not state (`forms`: slot -> the phrasings that
    state it, from `simulator.decisions.answer_forms`; the bare value when absent)."""
    forms = forms or {}
    return [k for k in asked if k in slots and not mentions(list(forms.get(k) or [slots[k]]), message)]


def make_answers_reward(predictor: PatternPredictor) -> RewardFunc:
    """`predictor`: the behaviour labeler (pattern -> probability of a dialogue's last user turn)."""

    @named("answers")
    def answers(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        parsed = parse_completions(completions)
        n = len(parsed)
        rows = zip(parsed, column(kwargs, "asked_slots", n, "[]"), column(kwargs, "goal_slots", n),
                   column(kwargs, "private_slots", n, "[]"), column(kwargs, "answer_forms", n, "{}"),
                   strict=True)
        out: list[float | None] = []
        to_label: list[int] = []
        for i, (turn, raw_asked, raw_slots, raw_private, raw_forms) in enumerate(rows):
            slots = load_slots(raw_slots)
            asked = [k for k in json.loads(raw_asked or "[]") if k in slots]
            if not asked:
                out.append(None)
                continue
            if not turn.ok:
                out.append(0.0)
                continue
            missing = unanswered(turn.message, slots, asked, json.loads(raw_forms or "{}"))
            private = set(json.loads(raw_private or "[]"))
            if not missing:
                out.append(1.0)
            elif set(missing) <= private:
                out.append(0.0)
                to_label.append(i)  # 1.0 if the dodge is a human one
            else:
                out.append(0.0)
        if to_label:
            agents = column(kwargs, "agent_message", n, "")
            dialogues = [[Turn(role="assistant", content=agents[i] or "(no message)"),
                          Turn(role="user", content=parsed[i].message or "(empty message)")]
                         for i in to_label]
            for i, probs in zip(to_label, predictor(dialogues), strict=True):
                if max(float(probs.get(p, 0.0)) for p in HUMAN_WITHHOLDING) >= THRESHOLD:
                    out[i] = 1.0
        return out

    return answers
