"""The simulator's turn format on the wire: the tags, the end marker, the opening cue, the `<think>`
target a turn is written as, and the tolerant parser that reads one back.

The simulator plays the *user*, so in the chat template it speaks as "assistant" and the agent
becomes "user" (the role flip: `simulator.dialogue`). Each simulator turn is
`<think>private reasoning</think>message`, with END_MARKER appended when the user leaves. Past
simulator turns keep their reasoning in the context (the simulator remembers its own thoughts), so
training and inference see the same text. Only `message` ever reaches the agent or a metric.

What the card says lives in `simulator.cards`, the role-flipped dialogue in `simulator.dialogue`, the
SFT windows in `simulator.sft_data`; this module is the part every one of them, the runtime, the
rewards and `mimesis export` agree on (`FORMAT_VERSION`, stored with every trained simulator).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
END_MARKER = "[END_CONVERSATION]"
# When the user speaks first there is no agent message to answer; this cue stands in for it, so
# the dialogue still alternates and an opening is generated like any other reply. It reads as what
# a chat window shows (an event, not an instruction): v1's "(The conversation starts. Write your
# first message.)" was riffed on and echoed by trained simulators.
OPENING_CUE = "[chat opened]"
FORMAT_VERSION = "mimesis-turn-v2"


def format_spec() -> dict[str, str]:
    """The turn format as data: stored with every logged simulator so loaders can check it."""
    return {"version": FORMAT_VERSION, "think_open": THINK_OPEN, "think_close": THINK_CLOSE,
            "end_marker": END_MARKER, "opening_cue": OPENING_CUE}


def render_target(reasoning: str | None, message: str, ended: bool = False) -> str:
    """`<think>reasoning</think>message` (+ END_MARKER): what the simulator learns to write."""
    text = f"{THINK_OPEN}{(reasoning or '').strip()}{THINK_CLOSE}{message.strip()}"
    return f"{text} {END_MARKER}" if ended else text


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
