"""The `rules` labeler: lexicons, regular expressions and dialogue-context features, no training.

Each pattern's score is the noisy-OR of the cues that fire, `1 - prod(1 - weight)`, so one strong
cue or two medium ones pass the default threshold of 0.5. Context features come from the agent's
last turn (was a question asked and left unanswered, was something offered, were personal details
requested, was a claim made) and from the goal card (does a numeric slot get a new value). The
form features measure the message itself: length, verbless fragments, typos against an offline
English word list, cut-off endings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.labelers import acts as da
from mimesis_rl.behavior.labelers import lexicon as lx
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.data.schema import PATTERN_NAMES

Cues = dict[str, list[tuple[str, float]]]
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_NUMBER = re.compile(
    r"\b\d[\d,.]*\b|\b(one|two|three|four|five|six|seven|eight|nine|ten|twenty|thirty|forty|"
    r"fifty|hundred|thousand|half)\b",
    re.IGNORECASE,
)
_YES_NO = re.compile(
    r"^\W*(yes|yeah|yep|yup|ya|no|nope|nah|sure|of course|definitely|absolutely|not|never|"
    r"i (do|did|am|have|was|can|will|would)|it (is|was|does)|probably|maybe|totally|kind of|"
    r"sort of|i think|i guess|correct|right|true|exactly|always|sometimes|ok|okay)\b",
    re.IGNORECASE,
)
_ACCEPT = re.compile(
    r"\b(ok(ay)?|sure|deal|agreed?|sounds? (good|great|fair)|works for me|that works|fine by me|"
    r"i accept|perfect|yes|yeah|yep)\b",
    re.IGNORECASE,
)
_UNDERVALUE = re.compile(
    r"\byou (can|could) (always|just|easily) \w+|\byou (don'?t|do not|won'?t) (really |even )?need\b|"
    r"\b(do|would) you (really|even) need\b|\byou (already )?have (plenty|enough|a lot)\b|"
    r"\b(just|already) (bonus|extra)\b",
    re.IGNORECASE,
)
_ANSWER_START = re.compile(
    r"^\W*(yes|yeah|yep|sure|it'?s|its|i'?m|i am|we'?re|my|the|a|an|\d)", re.IGNORECASE
)


@dataclass(frozen=True)
class AgentTurn:
    """What the labeler reads from the agent's last turn."""

    text: str
    question: str | None  # the last sentence that asks something
    offered: bool  # a proposal, offer, suggestion or request for action
    asks_personal: bool  # a request for personal details

    @property
    def is_claim(self) -> bool:
        return bool(self.text) and self.question is None and not self.offered


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def read_agent_turn(text: str | None) -> AgentTurn:
    text = lx.normalise(text or "")
    questions = [s for s in _sentences(text) if s.endswith("?") or lx.QUESTION_START.match(s)]
    question = questions[-1] if questions else None
    offered = bool(lx.AGENT_OFFER.search(text))
    return AgentTurn(
        text=text,
        question=question,
        offered=offered,
        asks_personal=bool(lx.PERSONAL_REQUEST.search(text))
        and (question is not None or "please" in text.lower() or "need" in text.lower()),
    )


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in lx.WORD.findall(text) if len(w) > 2 and w.lower() not in ENGLISH_STOP_WORDS}


def _hits(cues: Sequence[lx.Cue], text: str) -> list[tuple[str, float]]:
    return [(name, weight) for name, weight, rx in cues if rx.search(text)]


def noisy_or(weights: Sequence[float]) -> float:
    out = 1.0
    for w in weights:
        out *= 1.0 - min(max(w, 0.0), 1.0)
    return 1.0 - out


class RulesLabeler(Labeler):
    """Hand-written cues; `cues(context)` says which fired and why, `predict_proba` scores them."""

    name = "rules"

    def __init__(self, thresholds: float | Mapping[str, float] = 0.5) -> None:
        super().__init__(thresholds)
        self._vocab = lx.vocabulary()

    # -- form ----------------------------------------------------------------------------------------------
    def _typos(self, text: str) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        if lx.CORRECTION_LINE.search(text):
            out.append(("correction_line", 0.7))
        typos = sum(1 for word in lx.WORD.findall(text) if lx.is_typo(word, self._vocab))
        return out + [("typo", 0.6)] * min(typos, 2)

    def _form(self, text: str) -> list[tuple[str, float]]:
        stripped = text.strip()
        words = lx.WORD.findall(stripped)
        n = len(words)
        cues: list[tuple[str, float]] = []
        conventional = bool(lx.CONVENTIONAL.match(stripped))
        parts = [p for p in re.split(r"[.!?\n]+", stripped) if lx.WORD.search(p)]
        verbless = bool(parts) and not any(lx.VERBISH.search(p) or lx.SUBJECT_VERB.search(p) for p in parts)
        if not conventional:
            if n <= 1:
                cues.append(("one_word", 0.8))
            elif n == 2 and verbless:
                cues.append(("two_words", 0.65))
            elif n <= 10 and verbless:
                cues.append(("fragment", 0.55))
        if n >= 4 and stripped[-1:].isalpha() and lx.FUNCTION_END.search(stripped):
            cues.append(("cut_off", 0.5))
        if stripped.endswith(("...", "..")) and n <= 6:
            cues.append(("trailing_off", 0.35))
        if lx.SHORTHAND.search(stripped):
            cues.append(("shorthand", 0.3))
        return cues + self._typos(stripped)

    # -- all patterns ----------------------------------------------------------------------------------
    def cues(self, ctx: TurnInContext) -> Cues:
        """pattern -> [(cue, weight), ...] for every cue that fires on this turn."""
        text = lx.normalise(ctx.text).strip()
        low = text.lower()
        agent = read_agent_turn(ctx.last_agent)
        words = lx.WORD.findall(text)
        n = len(words)
        digits = bool(re.search(r"\d", text))
        is_question = "?" in text or bool(lx.QUESTION_START.match(text))
        reciprocal_only = bool(lx.RECIPROCAL_QUESTION.match(low.strip()))
        overlap = len(_content_words(text) & _content_words(agent.text)) if agent.text else 0
        out: Cues = {name: [] for name in PATTERN_NAMES}

        # vague_request: generic wording, no specifics, as a request or as the answer to an open question
        vague = _hits(lx.VAGUE, low)
        if vague:
            if digits or n > 25:
                vague = [(c, w * 0.4) for c, w in vague]
            if agent.question and re.match(r"^(what|where|how|which)", agent.question, re.IGNORECASE):
                vague.append(("open_question", 0.25))
            if re.search(r"\b(i need|i want|looking for|can you|could you|help|i'?d like)\b", low):
                vague.append(("request", 0.2))
        if agent.question and n <= 4 and lx.VAGUE_GENERIC_ANSWER.match(low.strip()):
            vague.append(("generic_answer", 0.6))
        out["vague_request"] = vague

        # implicit_preference: a fact about oneself, in answer to a question or a proposal
        implicit = _hits(lx.IMPLICIT, low)
        if implicit and not (agent.question or agent.offered):
            implicit = [(c, w * 0.6) for c, w in implicit]
        if implicit and (agent.question or agent.offered) and not lx.EXPLICIT_PREFERENCE.search(low):
            implicit.append(("answers_with_fact", 0.2))
        out["implicit_preference"] = implicit

        # withholding_info: a direct question left unanswered
        if agent.question and not agent.offered or (agent.asks_personal and agent.question):
            withhold = _hits(lx.WITHHOLD, low)
            if is_question and not reciprocal_only:
                withhold.append(("counter_question", 0.3))
            if reciprocal_only:
                withhold.append(("only_turns_back", 0.5))
            q = agent.question or ""
            if lx.YES_NO_START.match(q) and not _YES_NO.match(low):
                withhold.append(("no_yes_or_no", 0.25))
            if lx.NUMERIC_QUESTION.search(q) and not _NUMBER.search(low):
                withhold.append(("no_number", 0.3))
            if _ANSWER_START.match(low) and not lx.WITHHOLD[0][2].search(low):
                withhold = [(c, w * 0.4) for c, w in withhold]
            out["withholding_info"] = withhold if any(w >= 0.3 for _, w in withhold) else []

        # privacy_concern: declining personal details or questioning why they are needed
        privacy = _hits(lx.PRIVACY, low)
        strong = [c for c in privacy if c[0] != "sensitive_item"]
        if not strong:
            privacy = []
        elif agent.asks_personal:
            privacy.append(("personal_request", 0.3))
        out["privacy_concern"] = privacy

        # domain-free acts (acts.py): what the agent put on the table and what the message does with it
        user_acts = dict(zip(da.USER_ACTS, da.acts(text), strict=True))
        agent_acts = dict(zip(da.AGENT_ACTS, da.acts(agent.text, da.AGENT_ACTS), strict=True))
        proposed = agent.offered or any(agent_acts[a] for a in ("allocation", "conditional", "ask_share"))
        counters = any(user_acts[a] for a in ("allocation", "conditional", "ask_share"))
        accepts = bool(_ACCEPT.search(low))

        # refusal: rejecting what the agent offered, with or without a "no" (restating an incompatible need)
        refuse = _hits(lx.REFUSE, low)
        if not agent.offered:
            refuse = [(c, w * (0.9 if c == "no_thanks" else 0.45)) for c, w in refuse]
        if proposed and user_acts["decline"]:
            refuse.append(("declines_proposal", 0.55))
        elif proposed and user_acts["need"] and not accepts and not counters:
            refuse.append(("restates_need", 0.45))
        out["refusal"] = refuse

        criticism = _hits(lx.CRITICISM, low)
        if agent.text and user_acts["complaint"]:
            criticism.append(("complaint", 0.4))
        out["criticism"] = criticism

        push = _hits(lx.PUSHBACK, low)
        if not agent.text:
            push = [(c, w * 0.5) for c, w in push]
        elif agent.is_claim and push and overlap:
            push.append(("contests_claim", 0.25))
        if agent.text and _UNDERVALUE.search(low):
            push.append(("undervalues_other_side", 0.55))
        if agent.text and user_acts["decline"] and (user_acts["need"] or user_acts["complaint"]):
            push.append(("argues_own_position", 0.35))
        out["pushback"] = push

        # intent_change: a revision marker, stronger when a goal slot gets a new value
        intent = _hits(lx.INTENT, low)
        if intent and ctx.goal and ctx.goal.slots:
            numbers = {m.group(0).replace(",", "") for m in re.finditer(r"\d[\d,]*", text)}
            slot_numbers = {str(v) for v in ctx.goal.slots.values() if isinstance(v, int | float)}
            if numbers and slot_numbers and not numbers & slot_numbers:
                intent.append(("slot_value_changed", 0.35))
        if intent and ctx.earlier_user and any(c in ("make_it", "revise") for c, _ in intent):
            intent.append(("revises_earlier_request", 0.15))
        out["intent_change"] = intent

        ambiguity = _hits(lx.AMBIGUITY, low)
        if len(re.findall(r"\bor\b", low)) >= 2:
            ambiguity.append(("several_options", 0.35))
        out["goal_ambiguity"] = ambiguity

        emotion = _hits(lx.EMOTION, text)
        caps = [w for w in lx.CAPS_WORD.findall(text) if w not in lx.COMMON_ACRONYMS]
        if caps:
            emotion.append(("caps", 0.55))
        out["emotional_expression"] = emotion

        out["incomplete_utterance"] = self._form(text)

        negotiate = _hits(lx.NEGOTIATE, low)
        if (
            negotiate
            and (digits or agent.offered)
            and re.search(r"\$|\d|price|fee|deal|offer|cost", low + agent.text)
        ):
            negotiate.append(("about_price", 0.2))
        if user_acts["allocation"]:
            negotiate.append(("allocation", 0.55))
        if user_acts["conditional"]:
            negotiate.append(("conditional_trade", 0.5))
        if user_acts["ask_share"] and (user_acts["quantity"] or proposed):
            negotiate.append(("asks_for_share", 0.45))
        out["negotiation"] = negotiate

        probe: list[tuple[str, float]] = []
        if agent.text and is_question and not reciprocal_only:
            probe = _hits(lx.PROBE, low)
            if overlap:
                probe.append(("about_agent_turn", 0.35))
        out["follow_up_probe"] = probe
        return out

    def predict_proba(self, contexts: Sequence[TurnInContext]) -> np.ndarray:
        rows = []
        for ctx in contexts:
            cues = self.cues(ctx)
            rows.append([noisy_or([w for _, w in cues[name]]) for name in PATTERN_NAMES])
        return np.asarray(rows, dtype=float).reshape(len(contexts), len(PATTERN_NAMES))
