"""The stateless chat endpoint's one job: turn an agent-side message list into the simulator's
role-flipped prompt, checking every field on the way (a bad field is a 422 that names it).

The agent sends its dialogue as it sees it: its own turns are `assistant`, the simulated user's past
turns are `user`, and a leading `system` message is the *user's* goal card in plain text (an agent's
own system prompt must not be sent: the user would read it as their goal). The simulator sees the
mirror image: its card as the system message, the agent's turns as `user`, its own turns as
`assistant`; when the user speaks first, the opening cue stands in for the missing agent message,
exactly as in a session.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from fastapi.exceptions import RequestValidationError

from mimesis_rl.data.jsonl import loads_strict
from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import SessionSpec
from mimesis_rl.serve.schemas import ChatRequest
from mimesis_rl.simulator.dialogue import flip_roles

GENERIC_GOAL = "Have a casual, friendly chat about whatever comes up."
CHAT_DOMAIN, GOAL_DOMAIN = "chitchat", "general"


def invalid(loc: tuple[Any, ...], message: str) -> RequestValidationError:
    """A 422 in FastAPI's own shape, so hand-made checks read like the schema's."""
    return RequestValidationError([{"loc": ("body", *loc), "msg": message, "type": "value_error"}])


# The edge rule for text (documented in the README's serve section):
# - a lone surrogate (`"\\ud800"` in JSON: not a character, it cannot be encoded or tokenised) is
#   refused anywhere in a request: 422 naming the field;
# - NUL and other control characters (tab, newline, carriage return are fine) are refused with a 422
#   in what sets a dialogue up (goal text and slots, persona, domain, model, metadata, the chat system
#   message), where they can only be a mistake;
# - in dialogue messages (the agent's messages, the user's past turns), which an RL policy writes and
#   where a 422 would break a rollout, each is replaced by U+FFFD and the count is returned
#   (`mimesis.replaced_characters` / `replaced_characters`). Bidi marks pass unchanged.
REPLACEMENT = "\ufffd"


def printable(text: str) -> str:
    """`text` safe to echo in an error (lone surrogates written as \\udXXX escapes)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def check_text(value: Any, loc: tuple[Any, ...] = (), controls: bool = False) -> None:
    """Apply the edge rule to every string in `value` (dicts, lists, nested), keys included;
    `controls=True` lets NUL and control characters through (to be replaced by `normalise`)."""
    from mimesis_rl.data.chars import describe, suspicious_chars

    if isinstance(value, str):
        refused = ("surrogate",) if controls else ("nul", "control", "surrogate")
        kinds = [k for k in suspicious_chars(value) if k in refused]
        if kinds:
            raise invalid(loc, f"holds {describe(kinds)}; refused by the server's text rule (lone surrogates "
                               "anywhere; NUL and control characters outside dialogue messages)")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, (*loc, printable(str(key))), controls)
            check_text(item, (*loc, printable(str(key))), controls)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_text(item, (*loc, i), controls)


def normalise(text: str) -> tuple[str, int]:
    """A dialogue message with each NUL or control character (not tab/newline/CR) replaced by U+FFFD,
    and how many were replaced."""
    from mimesis_rl.data.chars import CONTROL

    return CONTROL.subn(REPLACEMENT, text)


def check_chat(request: ChatRequest) -> int:
    """The edge rule over a chat request: refuse what must be refused (422), replace control
    characters in the dialogue messages in place; returns the number replaced."""
    data = request.model_dump(exclude={"messages"})
    check_text(data)
    replaced = 0
    for i, message in enumerate(request.messages):
        setup = message.role in ("system", "developer")
        check_text(message.model_dump(), ("messages", i), controls=not setup)
        if setup:
            continue
        if isinstance(message.content, str):
            message.content, n = normalise(message.content)
            replaced += n
        else:
            for part in message.content:
                part.text, n = normalise(part.text)
                replaced += n
    return replaced


def known_domains(extra: Collection[str] = ()) -> list[str]:
    """The built-in task domains, the corpus domains chitchat/general, and any configured extras."""
    from mimesis_rl.envs.registry import DOMAINS

    return sorted({*DOMAINS, CHAT_DOMAIN, GOAL_DOMAIN, *extra})


def check_domain(domain: str, known: Collection[str], loc: tuple[Any, ...]) -> None:
    if domain not in known:
        raise invalid(loc, f"unknown domain {domain!r}; known: {', '.join(sorted(known))}")


def check_length(text: str, limit: int, loc: tuple[Any, ...], allow_empty: bool = False) -> None:
    if not text.strip() and not allow_empty:
        raise invalid(loc, "must not be empty")
    if len(text) > limit:
        raise invalid(loc, f"{len(text)} characters; the limit is {limit} (serve.max_message_chars)")


@dataclass
class ChatPrompt:
    spec: SessionSpec
    messages: list[dict[str, str]]  # role-flipped, system card first


def build_prompt(request: ChatRequest, user: Any, known: Collection[str], max_chars: int,
                 max_messages: int) -> ChatPrompt:
    """The simulator's prompt for `request`; raises a 422 naming the first bad field.

    user: the runtime (`UserSimulator`): its `card` for the goal, its `past_turn` for each of the user's
    past messages as its own turn; the role flip is the turn format's (`simulator.dialogue.flip_roles`).
    """
    if request.stream:
        raise invalid(("stream",), "streaming is not supported: send stream=false (a user turn is short)")
    if request.n not in (None, 1):
        raise invalid(("n",), f"n={request.n}: one user turn per request; send n=1 and repeat the request")
    messages = request.messages
    if not messages:
        raise invalid(("messages",), "no messages: send the user's goal card as a system message and/or the "
                                     "dialogue so far")
    if len(messages) > max_messages:
        raise invalid(("messages",), f"{len(messages)} messages; the limit is {max_messages} "
                                     "(serve.max_messages)")
    goal_text = None
    dialogue: list[tuple[int, str, str]] = []
    for i, message in enumerate(messages):
        text = message.text()
        # The user's own past turns may be empty (a user who left said nothing); nothing else may.
        check_length(text, max_chars, ("messages", i, "content"), allow_empty=message.role == "user")
        if message.role in ("system", "developer"):
            if i != 0:
                raise invalid(("messages", i, "role"), "a system message (the user's goal card) may only "
                                                       "come first, and only once")
            goal_text = text
            continue
        if dialogue and dialogue[-1][1] == message.role:
            raise invalid(("messages", i, "role"), f"two `{message.role}` messages in a row: the dialogue "
                                                   "alternates user/assistant")
        dialogue.append((i, message.role, text))
    if dialogue and dialogue[-1][1] == "user":
        raise invalid(("messages", dialogue[-1][0], "role"),
                      "the last message is the user's: the agent (role `assistant`) speaks before the user "
                      "answers again")

    meta = request.metadata
    domain = (meta.domain if meta else None) or (GOAL_DOMAIN if goal_text else CHAT_DOMAIN)
    check_domain(domain, known, ("metadata", "domain"))
    persona = meta.persona if meta else None
    if isinstance(persona, str):
        try:
            persona = loads_strict(persona)
        except ValueError as exc:  # malformed, NaN, a huge number, nested too deep
            raise invalid(("metadata", "persona"), f"not a JSON object: {exc}") from None
        if not isinstance(persona, dict):
            raise invalid(("metadata", "persona"), "must be a JSON object (name -> value)")
        check_text(persona, ("metadata", "persona"))
    spec = SessionSpec(goal=GoalCard(text=goal_text or GENERIC_GOAL), domain=domain,
                       persona=dict(persona or {}), seed=request.seed or 0)
    turns = [(role, user.past_turn(text) if role == "user" else text) for _, role, text in dialogue]
    return ChatPrompt(spec=spec, messages=flip_roles(user.card(spec), turns))
