"""The agent's action grammar: `<action>{json}</action>` inside a message, parsed with clear feedback.

Why one tag format for every domain: models learn it once; the feedback strings are what a
model sees after a mistake, so they say exactly what was wrong and how a valid action looks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from mimesis_rl.envs.protocols import Action, ActionSpec, ParsedMessage, UserReply

ACTION_RE = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_OPEN_RE = re.compile(r"<action>", re.IGNORECASE)
_CLOSE_RE = re.compile(r"</action>", re.IGNORECASE)

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "number": (int, float),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
}


def _type_ok(value: Any, kind: str) -> bool:
    if kind in ("int", "number") and isinstance(value, bool):
        return False
    if kind == "int" and isinstance(value, float) and value.is_integer():
        return True
    return isinstance(value, _JSON_TYPES[kind])


def strip_actions(message: str) -> str:
    """The message without any action tags (what remains is talk)."""
    return " ".join(ACTION_RE.sub(" ", message).split())


def parse_message(message: str | None, specs: Sequence[ActionSpec]) -> ParsedMessage:
    """Split `message` into talk and at most one action, checked against the grammar `specs`.

    Returns a ParsedMessage whose `error` explains any problem (never raises on bad input).
    """
    if message is None or not str(message).strip():
        return ParsedMessage(text="", error="empty message: write to the user or take an action")
    message = str(message)
    by_type = {spec.type: spec for spec in specs}
    found = ACTION_RE.findall(message)
    text = strip_actions(message)
    n_open, n_close = len(_OPEN_RE.findall(message)), len(_CLOSE_RE.findall(message))
    if not found:
        if n_open or n_close:
            return ParsedMessage(text=text, error="unclosed action tag: write <action>{...}</action>")
        return ParsedMessage(text=text)
    if len(found) > 1 or n_open != n_close:
        return ParsedMessage(text=text, error=f"{len(found)} actions in one message: take one at a time")
    body = found[0].strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at column {exc.colno}"
        return ParsedMessage(text=text, error=f"action is not valid JSON ({where}): {body[:80]!r}")
    if not isinstance(obj, dict):
        return ParsedMessage(text=text, error=f"action must be a JSON object, got {type(obj).__name__}")
    allowed = ", ".join(sorted(by_type))
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        return ParsedMessage(text=text, error=f'action has no "type"; allowed types: {allowed}')
    spec = by_type.get(kind)
    if spec is None:
        return ParsedMessage(text=text, error=f"unknown action type {kind!r}; allowed types: {allowed}")
    args = {k: v for k, v in obj.items() if k != "type"}
    missing = [name for name in spec.fields if name not in args and name not in spec.optional]
    if missing:
        return ParsedMessage(
            text=text, error=f"{kind}: missing field(s) {', '.join(missing)}; usage: {spec.usage()}"
        )
    for name, value in args.items():
        expected = spec.fields.get(name)
        if expected is None:
            known = ", ".join(spec.fields) or "(none)"
            return ParsedMessage(text=text, error=f"{kind}: unknown field {name!r}; fields: {known}")
        if not _type_ok(value, expected):
            got = f"{type(value).__name__} {value!r}"
            return ParsedMessage(text=text, error=f"{kind}: field {name!r} must be {expected}, got {got}")
        if expected == "int" and isinstance(value, float):
            args[name] = int(value)
    return ParsedMessage(text=text, action=Action(type=kind, args=args, kind=spec.kind, raw=body))


def action_tag(kind: str, **args: Any) -> str:
    """Write an action the way the grammar reads it (for scripted agents and tests)."""
    return "<action>" + json.dumps({"type": kind, **args}) + "</action>"


_REJECT_RE = re.compile(
    r"\b(no deal|not a deal|reject|decline|no,? thanks|no thank you|not interested|can'?t accept|"
    r"won'?t accept|don'?t accept|not (?:good )?enough|too (?:high|low|much|expensive|little)|"
    r"not for me|pass on|nope|"
    r"not quite|no way|i'?ll pass|not what i)\b",
    re.IGNORECASE,
)
_ACCEPT_RE = re.compile(
    r"\b(deal|accept(?:ed)?|agreed?|sounds good|i'?ll take it|i'?ll take that|let'?s do it|works for me|"
    r"perfect|fantastic|that works|yes,? please|sold|i'?m in|go ahead|book it|i'?ll watch|i'?ll try it|"
    r"love it|"
    r"(?:i|we)'?ll (?:buy|take|book|see) (?:it|that|this)|we can (?:grab|take|book) it|"
    r"(?:that'?s|that is|sounds|looks) (?:great|wonderful|excellent|fine))\b",
    re.IGNORECASE,
)


def accept_from_text(message: str) -> bool | None:
    """Read a user's answer to a proposal from plain text (for user sides that do not set meta).

    True for acceptance, False for a clear rejection, None when the text says neither.
    """
    if _REJECT_RE.search(message):
        return False
    if _ACCEPT_RE.search(message):
        return True
    return None


def reply_accepts(reply: UserReply) -> bool:
    """Does this reply accept the pending proposal, as the environment decides it: the reply's
    `meta["accept"]` when the user side set it, else the text read by `accept_from_text` (a reply
    that says neither declines). Shared by `TaskEnv.user_turn` and the simulator's decision reward."""
    accept = reply.meta.get("accept")
    if accept is None:
        accept = accept_from_text(reply.message or "")
    return bool(accept)
