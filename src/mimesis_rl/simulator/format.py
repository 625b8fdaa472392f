"""The simulator's turn format: system card, role-flipped dialogue, `<think>` target and its parser.

The simulator plays the *user*, so in the chat template it speaks as "assistant" and the agent
becomes "user". Each simulator turn is `<think>private reasoning</think>message`, with
END_MARKER appended when the user leaves. Past simulator turns keep their reasoning in the
context (the simulator remembers its own thoughts), so training and inference see the same text.
Only `message` ever reaches the agent or a metric.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.data.schema import PATTERN_NAMES, Conversation, GoalCard, Turn

log = logging.getLogger(__name__)

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
END_MARKER = "[END_CONVERSATION]"
# When the user speaks first there is no agent message to answer; this cue stands in for it, so
# the dialogue still alternates and an opening is generated like any other reply. It reads as what
# a chat window shows (an event, not an instruction): v1's "(The conversation starts. Write your
# first message.)" was riffed on and echoed by trained simulators.
OPENING_CUE = "[chat opened]"
FORMAT_VERSION = "mimesis-turn-v2"

# How to *act* each pattern (instructions to the simulator, not labelling definitions).
BEHAVIOUR_GUIDANCE: dict[str, str] = {
    "vague_request": "start underspecified, let the details come out only when asked",
    "implicit_preference": "hint at what you like instead of stating it outright",
    "withholding_info": "sometimes leave a question unanswered or deflect it",
    "privacy_concern": "be reluctant to share personal details and ask why they are needed",
    "refusal": "turn down suggestions that do not fit you",
    "criticism": "say so when an answer is unhelpful or wrong",
    "pushback": "argue for your own view when you disagree",
    "intent_change": "you may change or revise what you want along the way",
    "goal_ambiguity": "you are not fully sure what you want and may waver",
    "emotional_expression": "show your feelings: impatience, worry, delight",
    "incomplete_utterance": "write short, casual messages, fragments and typos are fine",
    "negotiation": "haggle, bargain and compare offers",
    "follow_up_probe": "ask follow-up questions and ask the other side to explain",
}


def format_spec() -> dict[str, str]:
    """The turn format as data: stored with every logged simulator so loaders can check it."""
    return {"version": FORMAT_VERSION, "think_open": THINK_OPEN, "think_close": THINK_CLOSE,
            "end_marker": END_MARKER, "opening_cue": OPENING_CUE}


# ----------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------

def behaviour_profile(conversation: Conversation, limit: int = 4) -> list[str]:
    """The conversation's user patterns, most frequent first: the behaviour the card asks for."""
    counts = Counter(p for t in conversation.user_turns for p in t.patterns)
    order = {name: i for i, name in enumerate(PATTERN_NAMES)}
    return sorted(counts, key=lambda p: (-counts[p], order[p]))[:limit]


def _format_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_format_value(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_format_value(v) for v in value)
    return str(value)


def system_card(domain: str, goal: GoalCard | None = None, persona: Mapping[str, Any] | None = None,
                behaviours: Sequence[str] = ()) -> str:
    """The simulator's instructions: who it is, what it wants, what it keeps private, how it acts."""
    lines = [f"You are a real person (the user) in a conversation about {domain}. "
             "Stay in character: you are the user, never the assistant. Do not offer help; you are the one "
             "who wants something."]
    if persona:
        lines.append("Persona: " + "; ".join(f"{k}: {_format_value(v)}" for k, v in persona.items()))
    if goal is not None:
        lines.append(f"Your goal: {goal.text}")
        shared = {k: v for k, v in goal.slots.items() if k not in goal.private}
        private = {k: v for k, v in goal.slots.items() if k in goal.private}
        if shared:
            lines.append("What you know: " + "; ".join(f"{k}: {_format_value(v)}" for k, v in shared.items()))
        if private:
            lines.append("Private (rather not say; reveal only if pressed, one at a time): "
                         + "; ".join(f"{k}: {_format_value(v)}" for k, v in private.items()))
    unknown = [b for b in behaviours if b not in BEHAVIOUR_GUIDANCE]
    if unknown:
        raise ValueError(f"unknown behaviour patterns {unknown}; known: {', '.join(PATTERN_NAMES)}")
    if behaviours:
        lines.append("How you behave: " + "; ".join(BEHAVIOUR_GUIDANCE[b] for b in behaviours) + ".")
    lines.append(f"First think privately inside {THINK_OPEN}{THINK_CLOSE}, then write only your message. "
                 f"When you want to leave, end your message with {END_MARKER}.")
    return "\n".join(lines)


_CARD_DOMAIN = re.compile(
    r"(?:a conversation|an AI assistant) about (.+?)\. (?:Stay in character|Write only)")


def card_domain(card: str) -> str | None:
    """The domain a card (`system_card` or the prompted baseline's) names, None for any other text."""
    match = _CARD_DOMAIN.search(card)
    return match.group(1) if match else None


def conversation_card(conversation: Conversation, max_behaviours: int = 4) -> str:
    return system_card(conversation.domain, conversation.goal, conversation.persona,
                       behaviour_profile(conversation, max_behaviours))


def render_target(reasoning: str | None, message: str, ended: bool = False) -> str:
    """`<think>reasoning</think>message` (+ END_MARKER): what the simulator learns to write."""
    text = f"{THINK_OPEN}{(reasoning or '').strip()}{THINK_CLOSE}{message.strip()}"
    return f"{text} {END_MARKER}" if ended else text


def user_left(conversation: Conversation, index: int) -> bool:
    """Did the user end the conversation with turn `index`? (the last turn, and a user turn)."""
    turn = conversation.turns[index]
    if turn.role != "user":
        return False
    return bool(turn.meta.get("ended")) or index == len(conversation.turns) - 1


def flip_roles(card: str, turns: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The simulator's view of a dialogue (the role flip, written once): its card as the system message,
    the agent's turns as `user`, the user's own turns as `assistant`; when the user speaks first (or
    nothing was said yet) the opening cue stands in for the agent's missing message.

    turns: (role in the data, `user` or `assistant`; the text as the simulator sees it: the user's own
    turns already rendered as it writes them, e.g. by `render_target`).
    """
    messages = [{"role": "system", "content": card}]
    if not turns or turns[0][0] == "user":
        messages.append({"role": "user", "content": OPENING_CUE})
    return messages + flip_turns(turns)


def flip_turns(turns: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """(data role, text) pairs as the simulator's chat messages: a user turn is its own (`assistant`),
    anything else the other side's (`user`)."""
    return [{"role": "assistant" if role == "user" else "user", "content": text} for role, text in turns]


def flipped_messages(conversation: Conversation, upto: int | None = None,
                     max_behaviours: int = 4) -> list[dict[str, str]]:
    """System card + turns[:upto] with roles flipped; the simulator's turns carry their reasoning."""
    end = len(conversation.turns) if upto is None else min(upto, len(conversation.turns))
    return flip_roles(conversation_card(conversation, max_behaviours), _own_view(conversation, 0, end))


def _flipped_turns(conversation: Conversation, start: int, end: int) -> list[dict[str, str]]:
    """turns[start:end] with roles flipped; user turns rendered as `<think>` targets."""
    return flip_turns(_own_view(conversation, start, end))


def _own_view(conversation: Conversation, start: int, end: int) -> list[tuple[str, str]]:
    """turns[start:end] as (role, text) with the user's turns rendered as `<think>` targets."""
    out = []
    for i in range(start, end):
        turn = conversation.turns[i]
        if turn.role == "user":
            out.append(("user", render_target(turn.reasoning, turn.content, user_left(conversation, i))))
        else:
            out.append((turn.role, turn.content))
    return out


def sft_example(conversation: Conversation, max_behaviours: int = 4) -> dict[str, Any] | None:
    """One conversational example: every simulator turn is an assistant message (the loss covers those).

    Agent turns after the user's last turn carry no target, so they are cut. None when there is
    no user turn at all.
    """
    last_user = max((i for i, t in enumerate(conversation.turns) if t.role == "user"), default=None)
    if last_user is None:
        return None
    return {"messages": flipped_messages(conversation, last_user + 1, max_behaviours)}


def sft_windows(conversation: Conversation, max_behaviours: int = 4,
                window_turns: int | None = None) -> list[dict[str, Any]]:
    """The conversation as consecutive windows of about `window_turns` turns, each under the system
    card and each ending on a user turn; None = one example for the whole conversation.

    Why: a long chat cut at `max_length` would teach only its first exchanges, never the later turns
    or the leaving. A window is also what the simulator sees at inference time, when the oldest
    exchanges are trimmed away (`trim_messages`): the card, then the recent dialogue.
    """
    last_user = max((i for i, t in enumerate(conversation.turns) if t.role == "user"), default=None)
    if last_user is None:
        return []
    if not window_turns or last_user + 1 <= window_turns:
        example = sft_example(conversation, max_behaviours)
        return [example] if example is not None else []
    turns = conversation.turns
    user_ends = [i + 1 for i, t in enumerate(turns) if t.role == "user"]  # a window ends after a user turn
    card = {"role": "system", "content": conversation_card(conversation, max_behaviours)}
    out = []
    start = 0
    while start <= last_user:
        inside = [e for e in user_ends if start < e <= start + window_turns]
        end = inside[-1] if inside else next(e for e in user_ends if e > start)
        messages = [card]
        if turns[start].role == "user":  # the flipped dialogue must open with the agent side
            before = [t.content for t in turns[:start] if t.role != "user"]
            messages.append({"role": "user", "content": before[-1] if before else OPENING_CUE})
        out.append({"messages": messages + _flipped_turns(conversation, start, end)})
        start = end
    return out


def sft_examples(conversations: Iterable[Conversation], max_behaviours: int = 4,
                 window_turns: int | None = None) -> list[dict[str, Any]]:
    return [example for conversation in conversations
            for example in sft_windows(conversation, max_behaviours, window_turns)]


@dataclass(frozen=True)
class TurnContext:
    """The context of one real user turn: what the simulator sees and what the real user did."""

    conversation_id: str
    domain: str
    turn_index: int
    prompt: list[dict[str, str]]
    real: Turn
    ended: bool
    goal: GoalCard | None
    agent_message: str | None  # the agent turn just before (None for an opening)
    user_turn_number: int  # 0 for the user's first turn

    @property
    def is_first(self) -> bool:
        return self.user_turn_number == 0


def turn_contexts(conversation: Conversation, max_behaviours: int = 4) -> Iterator[TurnContext]:
    """One TurnContext per user turn: the prompt up to it and the real turn as the reference."""
    n_user = 0
    for i, turn in enumerate(conversation.turns):
        if turn.role != "user":
            continue
        previous = conversation.turns[i - 1] if i > 0 else None
        yield TurnContext(
            conversation_id=conversation.conversation_id,
            domain=conversation.domain,
            turn_index=i,
            prompt=flipped_messages(conversation, i, max_behaviours),
            real=turn,
            ended=user_left(conversation, i),
            goal=conversation.goal,
            agent_message=previous.content if previous is not None and previous.role == "assistant" else None,
            user_turn_number=n_user,
        )
        n_user += 1


# ----------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ParsedTurn:
    """A parsed simulator output. Unpacks as `(reasoning, message, ended)`.

    `repairs` names what was fixed; `error` is set (and `message` empty) when the output was
    rejected because no safe repair exists.
    """

    reasoning: str
    message: str
    ended: bool
    repairs: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.reasoning, self.message, self.ended))


_TAG = re.compile(r"</?think>", re.IGNORECASE)
_WS = re.compile(r"\s+")


def _reject(reason: str, reasoning: str = "", ended: bool = False, repairs: Sequence[str] = ()) -> ParsedTurn:
    return ParsedTurn(reasoning=reasoning, message="", ended=ended, repairs=tuple(repairs), error=reason)


def normalise(text: str) -> str:
    """Whitespace-collapsed, lower-case: what "the same message" means for repeats."""
    return _WS.sub(" ", text).strip().lower()


def parse_output(text: str) -> ParsedTurn:
    """Split raw simulator output into reasoning, message and the leave flag.

    Safe repairs: a missing opening tag (everything before `</think>` is reasoning), several
    think blocks (all text before the last `</think>` becomes reasoning, so nothing private can
    leak), stray tags or the end marker in the wrong place, reasoning copied into the message.
    No tags at all: the whole text is the message (a model that does not know the format).
    Rejected: text before the first `<think>`, an unclosed `<think>`, an empty message.
    """
    raw = text.strip()
    repairs: list[str] = []
    opens = len(re.findall(r"<think>", raw, re.IGNORECASE))
    closes = len(re.findall(r"</think>", raw, re.IGNORECASE))

    if opens == 0 and closes == 0:
        reasoning, message = "", raw
        repairs.append("missing_think")
    elif closes == 0:
        return _reject("unclosed_think", reasoning=_TAG.sub(" ", raw).strip())
    else:
        last_close = [m for m in re.finditer(r"</think>", raw, re.IGNORECASE)][-1]
        head, message = raw[: last_close.start()], raw[last_close.end():]
        first_open = re.search(r"<think>", head, re.IGNORECASE)
        if first_open is None:
            repairs.append("missing_open_tag")
        elif head[: first_open.start()].strip():
            return _reject("text_before_think", reasoning=_TAG.sub(" ", head).strip())
        if opens > 1 or closes > 1:
            repairs.append("merged_think_blocks")
        reasoning = _WS.sub(" ", _TAG.sub(" ", head)).strip()
        if "<think>" in message.lower():
            # An opening tag after the last close starts reasoning that never ended: drop it.
            message = message[: message.lower().index("<think>")]
            repairs.append("dropped_trailing_think")

    ended = False
    if END_MARKER in reasoning:
        reasoning = reasoning.replace(END_MARKER, " ").strip()
        repairs.append("end_marker_in_reasoning")
    if END_MARKER in message:
        ended = True
        if not message.rstrip().endswith(END_MARKER) or message.count(END_MARKER) > 1:
            repairs.append("end_marker_moved")
        message = re.sub(r"\s*" + re.escape(END_MARKER) + r"\s*", " ", message)
    message = message.strip()

    if reasoning and len(normalise(reasoning)) >= 12 and normalise(reasoning) in normalise(message):
        # The model repeated its private reasoning in the message: cut it out if something is left.
        idx = message.lower().find(reasoning.lower())
        rest = (message[:idx] + message[idx + len(reasoning):]).strip(" \t\n.,;:-") if idx >= 0 else ""
        if not rest:
            return _reject("reasoning_in_message", reasoning=reasoning, ended=ended, repairs=repairs)
        message = rest
        repairs.append("removed_reasoning_from_message")

    if not message:
        return _reject("empty_message", reasoning=reasoning, ended=ended, repairs=repairs)
    return ParsedTurn(reasoning=reasoning, message=message, ended=ended, repairs=tuple(repairs))


@dataclass
class ParseStats:
    """Counts of every sampled output (clean, repaired, rejected by reason, role breaks) and of the
    turns that could not be made valid by re-sampling (`failed`, the session ends); logged as they
    happen."""

    total: int = 0
    clean: int = 0
    repaired: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    role_breaks: Counter[str] = field(default_factory=Counter)
    turns: int = 0  # turns asked for (each may take several samples)
    failed: Counter[str] = field(default_factory=Counter)  # turns still invalid after re-sampling
    opening_leaves: int = 0  # outputs that left the chat on its opening turn (re-sampled)
    repeats: int = 0  # outputs that said the user's last message a third time in a row (re-sampled)
    contradicting: int = 0  # outputs contradicting the goal card (re-sampled)
    contradictions: Counter[str] = field(default_factory=Counter)  # the same, by slot
    contradictions_delivered: int = 0  # turns where every sample contradicted (the first was delivered)
    cut_delivered: int = 0  # turns whose every sample closed its reasoning mid-sentence (first delivered)
    learned_leaves: int = 0  # turns the learned leave model ended (simulator.leaving)

    def note_contradiction(self, slots: Sequence[str], message: str) -> None:
        self.contradicting += 1
        self.contradictions.update(slots)
        log.info("simulator contradicted its card on %s (re-sampled): %r", ", ".join(slots), message[:200])

    def note_repeat(self, message: str) -> None:
        self.repeats += 1
        log.info("simulator repeated itself a third time (re-sampled): %r", message[:200])

    def note_opening_leave(self, message: str) -> None:
        self.opening_leaves += 1
        log.info("simulator left on the opening turn (re-sampled): %r", message[:200])

    def note_role_break(self, kind: str, message: str) -> None:
        self.role_breaks[kind] += 1
        log.info("simulator broke the user role (%s): %r", kind, message[:200])

    def note_turn(self, failure: str | None) -> None:
        self.turns += 1
        if failure is not None:
            self.failed[failure] += 1

    def add(self, parsed: ParsedTurn, raw: str = "") -> ParsedTurn:
        self.total += 1
        if parsed.error is not None:
            self.rejected[parsed.error] += 1
            log.warning("simulator output rejected (%s): %r", parsed.error, raw[:200])
        elif parsed.repairs:
            for reason in parsed.repairs:
                self.repaired[reason] += 1
            log.debug("simulator output repaired (%s): %r", ", ".join(parsed.repairs), raw[:200])
        else:
            self.clean += 1
        return parsed

    def parse(self, raw: str) -> ParsedTurn:
        return self.add(parse_output(raw), raw)

    def as_metrics(self, prefix: str = "parse") -> dict[str, float]:
        n = max(self.total, 1)
        out = {f"{prefix}.total": float(self.total), f"{prefix}.clean_rate": self.clean / n,
               f"{prefix}.rejected_rate": sum(self.rejected.values()) / n,
               f"{prefix}.repaired_rate": (self.total - self.clean - sum(self.rejected.values())) / n}
        out.update({f"{prefix}.rejected.{k}": float(v) for k, v in self.rejected.items()})
        out.update({f"{prefix}.repaired.{k}": float(v) for k, v in self.repaired.items()})
        out[f"{prefix}.role_break_rate"] = sum(self.role_breaks.values()) / n
        out.update({f"{prefix}.role_break.{k}": float(v) for k, v in self.role_breaks.items()})
        out[f"{prefix}.opening_leave_rate"] = self.opening_leaves / n
        out[f"{prefix}.repeat_rate"] = self.repeats / n
        out[f"{prefix}.contradiction_resample_rate"] = self.contradicting / n
        out[f"{prefix}.contradictions_delivered"] = float(self.contradictions_delivered)
        out[f"{prefix}.cut_delivered"] = float(self.cut_delivered)
        turns = max(self.turns, 1)
        out[f"{prefix}.turns"] = float(self.turns)
        out[f"{prefix}.failed_turn_rate"] = sum(self.failed.values()) / turns
        out.update({f"{prefix}.failed.{k}": float(v) for k, v in self.failed.items()})
        out[f"{prefix}.learned_leave_rate"] = self.learned_leaves / turns
        return out


def trim_messages(messages: Sequence[Mapping[str, str]], count_tokens: Callable[[list[dict[str, str]]], int],
                  limit: int) -> list[dict[str, str]]:
    """Drop the oldest exchanges (never the system card or the last message) until the prompt fits."""
    kept = [dict(m) for m in messages]
    while count_tokens(kept) > limit and len(kept) > 2:
        kept = [kept[0], *kept[3:]] if len(kept) > 3 else [kept[0], kept[-1]]
    return kept


def unflip(prompt: Sequence[Mapping[str, str]]) -> list[Turn]:
    """The dialogue a flipped prompt holds, back in the data's roles (system card and cue dropped).

    Past simulator turns are parsed, so a context-aware labeler sees only what was said.
    """
    turns: list[Turn] = []
    for message in prompt:
        role, content = message.get("role"), str(message.get("content", ""))
        if role == "system" or (role == "user" and content == OPENING_CUE):
            continue
        if role == "assistant":
            parsed = parse_output(content)
            if parsed.ok:
                turns.append(Turn(role="user", content=parsed.message, reasoning=parsed.reasoning or None))
        elif content.strip():
            turns.append(Turn(role="assistant", content=content))
    return turns
