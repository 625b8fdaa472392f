"""The Chit Chat Challenge corpus (PyPI `chitchat-dataset`, MIT): 7,168 real human-human chats.

Format: one JSON object, conversation id -> {messages: [[{text, timestamp, sender}, ...], ...],
ratings, start, prompt}; each inner list is one speaker's burst of messages. Every two-party
conversation becomes two views, `chitchat-<id>-a` (first speaker as the user) and `-b`; both carry
`persona.pair_id` so a split keeps them together. The starter prompt is the goal card's text.
Blank messages carry nothing and are skipped (counted in `outcome.blank_messages_skipped`);
conversations with a single speaker (unanswered openers) come back as `Excluded`.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

from mimesis_rl.data.adapters.base import (
    Adapter,
    Excluded,
    Item,
    SourceFieldError,
    build_conversation,
    load_json_document,
    raw_json,
)
from mimesis_rl.data.jsonl import BadRecord

SOURCE = "chitchat"
DOMAIN = "chitchat"


def embedded_path() -> Path:
    return Path(str(files("chitchat_dataset") / "dataset.json"))


def _bursts(cid: str, record: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Consecutive non-blank messages of one sender merged: ([{sender, texts, timestamps}], blank count)."""
    groups = record.get("messages")
    if not isinstance(groups, list):
        raise SourceFieldError(
            f"{cid}.messages", f"expected a list of message groups, got {type(groups).__name__}"
        )
    bursts: list[dict[str, Any]] = []
    blanks = 0
    for i, group in enumerate(groups):
        if not isinstance(group, list):
            raise SourceFieldError(
                f"{cid}.messages[{i}]", f"expected a list of messages, got {type(group).__name__}"
            )
        for j, message in enumerate(group):
            where = f"{cid}.messages[{i}][{j}]"
            if not isinstance(message, dict):
                raise SourceFieldError(where, f"expected an object, got {type(message).__name__}")
            text, sender = message.get("text"), message.get("sender")
            if not isinstance(text, str):
                raise SourceFieldError(f"{where}.text", f"expected a string, got {type(text).__name__}")
            if not isinstance(sender, str) or not sender:
                raise SourceFieldError(f"{where}.sender", "missing or not a string")
            if not text.strip():
                blanks += 1
                continue
            if not bursts or bursts[-1]["sender"] != sender:
                bursts.append({"sender": sender, "texts": [], "timestamps": []})
            bursts[-1]["texts"].append(text.strip())
            bursts[-1]["timestamps"].append(message.get("timestamp"))
    return bursts, blanks


def _map_record(path: Path, index: int, cid: str, record: Any) -> Iterator[Item]:
    raw = raw_json(record)
    if not isinstance(record, dict):
        yield BadRecord(str(path), index, cid, f"expected an object, got {type(record).__name__}", raw)
        return
    try:
        bursts, blanks = _bursts(cid, record)
    except SourceFieldError as err:
        yield BadRecord(str(path), index, err.field, err.reason, raw)
        return
    speakers = list(dict.fromkeys(burst["sender"] for burst in bursts))
    if len(speakers) < 2:
        note = f" after skipping {blanks} blank messages" if blanks else ""
        yield Excluded(
            str(path),
            index,
            f"{cid}.messages",
            f"{len(speakers)} speaker(s){note}: an unanswered monologue is not a two-party conversation",
            raw,
        )
        return
    if len(speakers) > 2:
        yield BadRecord(str(path), index, f"{cid}.messages", f"{len(speakers)} speakers; expected two", raw)
        return

    prompt = record.get("prompt")
    goal = {"text": prompt.strip()} if isinstance(prompt, str) and prompt.strip() else None
    outcome = {
        key: value
        for key, value in (
            ("ratings", record.get("ratings")),
            ("started_at", record.get("start")),
            ("blank_messages_skipped", blanks or None),
        )
        if value is not None
    }
    for view, user in zip("ab", speakers, strict=True):
        partner = speakers[1] if user == speakers[0] else speakers[0]
        turns = [
            {
                "role": "user" if burst["sender"] == user else "assistant",
                "content": "\n".join(burst["texts"]),
                "meta": {"timestamps": burst["timestamps"]},
            }
            for burst in bursts
        ]
        data = {
            "conversation_id": f"{SOURCE}-{cid}-{view}",
            "source": SOURCE,
            "domain": DOMAIN,
            "persona": {
                "pair_id": f"{SOURCE}-{cid}",
                "view": view,
                "speaker_id": user,
                "partner_id": partner,
            },
            "goal": goal,
            "outcome": outcome or None,
            "turns": turns,
        }
        yield build_conversation(data, path=path, line=index, where=f"{cid} (view {view})", raw=raw)


def read_file(path: Path) -> Iterator[Item]:
    """Items of one chitchat-format file, in the file's order."""
    data = load_json_document(path, dict)
    for index, (cid, record) in enumerate(data.items(), start=1):
        yield from _map_record(path, index, str(cid), record)


ADAPTER = Adapter(name="chitchat", read_file=read_file, suffixes=(".json",), embedded=embedded_path)
