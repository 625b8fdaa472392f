"""Generic chat logs, one conversation per JSONL line, as users already keep them.

Accepted lines: OpenAI-style `{"messages": [{"role", "content"}, ...]}` and ShareGPT-style
`{"conversations": [{"from", "value"}, ...]}`. Optional `id`, `domain`, `source` and `persona`
fields are respected; otherwise the id is `<file stem>-<line>`, the source the adapter option `source` (else
the file stem) and the domain the option `domain` (else `general`). System messages go to
`persona.system_prompt`, not to turns. Tool traffic (tool results, function calls) is never shown
to the user, so it is kept in `meta.tool_messages` of the assistant turn it belongs to.

A content list's text parts are joined by newlines; a part that is not text (an image, audio, a
file) becomes a placeholder in the text (`[image]`) and is kept whole in the turn's
`meta.non_text_parts` (with its index), so it can be restored.

Nothing is coerced or dropped: `id` must be a string or an integer (written as its decimal
string), `source`/`domain` strings, `persona` an object; anything else rejects the line with the
field named. Fields the adapter does not know are kept: a line's under the conversation's `meta`,
a message's under its turn's `meta`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mimesis_rl.data.adapters.base import Adapter, Item, SourceFieldError, build_conversation, raw_json
from mimesis_rl.data.jsonl import BadRecord, iter_jsonl

DEFAULT_DOMAIN = "general"
USER_ROLES = {"user", "human"}
ASSISTANT_ROLES = {"assistant", "gpt", "model", "bot", "chatgpt", "bard", "bing"}
SYSTEM_ROLES = {"system", "developer"}
TOOL_ROLES = {"tool", "function", "ipython", "observation", "function_call", "tool_call"}
KNOWN_ROLES = sorted(USER_ROLES | ASSISTANT_ROLES | SYSTEM_ROLES | TOOL_ROLES)
RECORD_KEYS = ("id", "source", "domain", "persona")  # mapped; any other field goes to `meta`
TOOL_CALL_KEYS = ("tool_calls", "function_call")


PLACEHOLDERS = {"image_url": "[image]", "image": "[image]", "input_image": "[image]",
                "input_audio": "[audio]", "audio": "[audio]", "file": "[file]", "input_file": "[file]"}


def placeholder(kind: Any) -> str:
    """What stands in the text for a part that is not text (`[image]`, `[audio]`, `[<type>]`)."""
    return PLACEHOLDERS.get(kind, f"[{kind}]" if isinstance(kind, str) and kind else "[non-text part]")


def _text(content: Any, where: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(plain text, non-text parts) of a message: a string, or an OpenAI content list whose text
    parts are joined by newlines. A part that is not text (an image, audio, a file) is never dropped:
    a placeholder (`[image]`) takes its place in the text and the part itself comes back, with its
    index, for the turn's `meta.non_text_parts`."""
    if content is None or isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        kind = type(content).__name__
        raise SourceFieldError(where, f"expected a string or a list of content parts, got {kind}")
    texts: list[str] = []
    kept: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        if not isinstance(part, dict):
            kind = type(part).__name__
            raise SourceFieldError(f"{where}[{i}]", f"expected a content part object, got {kind}")
        if part.get("type") == "text":
            if not isinstance(part.get("text"), str):
                raise SourceFieldError(f"{where}[{i}].text", "missing or not a string")
            texts.append(part["text"])
        else:
            texts.append(placeholder(part.get("type")))
            kept.append({"index": i, "part": part})
    return "\n".join(texts), kept


def _layout(record: dict[str, Any]) -> tuple[str, str, str]:
    """(list key, role key, content key) of the record's format."""
    if isinstance(record.get("messages"), list):
        return "messages", "role", "content"
    if isinstance(record.get("conversations"), list):
        return "conversations", "from", "value"
    raise SourceFieldError(
        "messages", "expected a `messages` list (OpenAI) or a `conversations` list (ShareGPT)"
    )


def _map(record: dict[str, Any], path: Path, line: int, options: dict[str, Any]) -> dict[str, Any]:
    key, role_key, content_key = _layout(record)
    turns: list[dict[str, Any]] = []
    system: list[str] = []
    tool_traffic: list[dict[str, Any]] = []  # waiting for the assistant turn it belongs to
    system_parts: list[dict[str, Any]] = []  # non-text parts of system messages (conversation meta)
    for i, message in enumerate(record[key]):
        where = f"{key}[{i}]"
        if not isinstance(message, dict):
            raise SourceFieldError(where, f"expected an object, got {type(message).__name__}")
        role = message.get(role_key)
        if not isinstance(role, str):
            raise SourceFieldError(f"{where}.{role_key}", "missing or not a string")
        role = role.strip().lower()
        if role not in KNOWN_ROLES:
            raise SourceFieldError(
                f"{where}.{role_key}", f"unknown role {message[role_key]!r}; known: {', '.join(KNOWN_ROLES)}"
            )
        text, non_text = _text(message.get(content_key), f"{where}.{content_key}")
        if role in SYSTEM_ROLES:
            if text and text.strip():
                system.append(text.strip())
            system_parts.extend({"message": i, **part} for part in non_text)
            continue
        tool_calls = message.get("tool_calls") or message.get("function_call")
        if role in TOOL_ROLES or (role in ASSISTANT_ROLES and not (text or "").strip() and tool_calls):
            tool_traffic.append({k: v for k, v in message.items() if k != "weight"})
            continue
        if text is None or not text.strip():
            raise SourceFieldError(f"{where}.{content_key}", "content is empty")
        turn: dict[str, Any] = {
            "role": "user" if role in USER_ROLES else "assistant",
            "content": text,
            "meta": {k: v for k, v in message.items() if k not in (role_key, content_key, *TOOL_CALL_KEYS)},
        }
        if non_text:
            turn["meta"]["non_text_parts"] = non_text
        if turn["role"] == "assistant":
            if tool_calls:
                turn["meta"]["tool_calls"] = tool_calls
            if tool_traffic:
                turn["meta"]["tool_messages"], tool_traffic = tool_traffic, []
        turns.append(turn)
    if tool_traffic:
        last = next((t for t in reversed(turns) if t["role"] == "assistant"), None)
        if last is None:
            raise SourceFieldError(key, "tool messages but no assistant message to attach them to")
        last["meta"].setdefault("tool_messages", []).extend(tool_traffic)
    if len(turns) < 2:
        raise SourceFieldError(key, f"needs at least 2 user/assistant messages, got {len(turns)}")

    cid = record.get("id")
    if isinstance(cid, bool) or not isinstance(cid, str | int | None):
        raise SourceFieldError("id", f"expected a string or an integer, got {_kind(cid)}")
    for name in ("source", "domain"):
        if not isinstance(record.get(name), str | None):
            raise SourceFieldError(name, f"expected a string, got {_kind(record[name])}")
    if not isinstance(record.get("persona"), dict | None):
        raise SourceFieldError("persona", f"expected an object, got {_kind(record['persona'])}")
    persona = dict(record.get("persona") or {})
    if system:
        if "system_prompt" in persona:
            raise SourceFieldError("persona.system_prompt", "set, and system messages too: which one holds?")
        persona["system_prompt"] = "\n\n".join(system)
    meta = {k: v for k, v in record.items() if k not in (key, *RECORD_KEYS)}
    if system_parts:
        meta["system_non_text_parts"] = system_parts
    return {
        "conversation_id": str(cid) if cid not in (None, "") else f"{path.stem}-{line}",
        "source": record.get("source") or options.get("source") or path.stem,
        "domain": record.get("domain") or options.get("domain") or DEFAULT_DOMAIN,
        "persona": persona or None,
        "meta": meta or None,
        "turns": turns,
    }


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", bool: "a boolean", float: "a number", int: "an integer",
            type(None): "null"}.get(type(value), type(value).__name__)


def read_file(path: Path, **options: Any) -> Iterator[Item]:
    """Items of one JSONL chat-log file; a bad line becomes a BadRecord naming file:line:field."""
    for line, record in iter_jsonl(path):
        if isinstance(record, BadRecord):
            yield record
            continue
        raw = raw_json(record)
        try:
            data = _map(record, path, line, options)
        except SourceFieldError as err:
            yield BadRecord(str(path), line, err.field, err.reason, raw)
            continue
        yield build_conversation(data, path=path, line=line, where=data["conversation_id"], raw=raw)


ADAPTER = Adapter(name="messages", read_file=read_file, suffixes=(".jsonl",), options=("domain", "source"))
