"""CaSiNo campsite negotiations (Chawla et al., NAACL 2021; CC BY 4.0): a JSON list of dialogues.

Each dialogue gives two views, `casino-<dialogue_id>-a` (mturk_agent_1 as the user) and `-b`.
The user's goal card holds their private priorities and written reasons as slots a verifier can
check (`priority_high` = an item, `reason_high` = the reason, `item_values` = points per package).
Deal messages become turns whose `meta.action` holds the deal seen from the user's side
(`issue2youget` = what the user gets); the content renders the deal from the speaker's side.
Outcomes go to `outcome`, personality and demographics to `persona`, strategy annotations to
`meta.strategies` of the turn they belong to.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mimesis_rl.data.adapters.base import (
    Adapter,
    Item,
    SourceFieldError,
    build_conversation,
    load_json_document,
    raw_json,
)
from mimesis_rl.data.jsonl import BadRecord

SOURCE = "casino"
DOMAIN = "campsite"
ISSUES = ("Food", "Water", "Firewood")
LEVELS = ("High", "Medium", "Low")
POINTS = {"High": 5, "Medium": 4, "Low": 3}
PACKAGES_PER_ISSUE = 3
WALK_AWAY_POINTS = 5
DEAL_MESSAGES = {
    "Submit-Deal": "submit_deal",
    "Accept-Deal": "accept_deal",
    "Reject-Deal": "reject_deal",
    "Walk-Away": "walk_away",
}
PARTICIPANTS = ("mturk_agent_1", "mturk_agent_2")


def _norm(text: str) -> str:
    return " ".join(text.split())


def _participant(info: Any, where: str) -> dict[str, Any]:
    """Priorities and reasons of one participant, checked: every level names a distinct issue."""
    if not isinstance(info, dict):
        raise SourceFieldError(where, "missing participant info")
    value2issue, value2reason = info.get("value2issue"), info.get("value2reason")
    if not isinstance(value2issue, dict) or sorted(value2issue) != sorted(LEVELS):
        raise SourceFieldError(f"{where}.value2issue", f"expected the levels {list(LEVELS)}")
    if sorted(value2issue.values()) != sorted(ISSUES):
        raise SourceFieldError(
            f"{where}.value2issue",
            f"expected each of {list(ISSUES)} once, got {sorted(map(str, value2issue.values()))}",
        )
    if not isinstance(value2reason, dict) or sorted(value2reason) != sorted(LEVELS):
        raise SourceFieldError(f"{where}.value2reason", f"expected a reason for each of {list(LEVELS)}")
    for level in LEVELS:
        if not isinstance(value2reason[level], str):
            raise SourceFieldError(f"{where}.value2reason.{level}", "expected a string")
    return info


def _goal(info: dict[str, Any]) -> dict[str, Any]:
    """The goal card: priorities in words for the simulator, slots for a verifier, all private."""
    issue = info["value2issue"]
    reason = {level: _norm(info["value2reason"][level]) for level in LEVELS}
    slots: dict[str, Any] = {}
    for level in LEVELS:
        slots[f"priority_{level.lower()}"] = issue[level]
        slots[f"reason_{level.lower()}"] = reason[level]
    slots["item_values"] = {issue[level]: POINTS[level] for level in LEVELS}
    slots["item_counts"] = {name: PACKAGES_PER_ISSUE for name in ISSUES}
    slots["walk_away_points"] = WALK_AWAY_POINTS
    private = [f"{kind}_{level.lower()}" for level in LEVELS for kind in ("priority", "reason")] + [
        "item_values"
    ]

    def why(level: str) -> str:
        return f' ("{reason[level]}")' if reason[level] else ""

    text = (
        f"You are going camping and negotiate with a neighbouring camper how to split {PACKAGES_PER_ISSUE} "
        f"packages each of Food, Water and Firewood. {issue['High']} matters most to you{why('High')}. "
        f"{issue['Medium']} comes second{why('Medium')}. {issue['Low']} matters least{why('Low')}. "
        f"Each package you get is worth {POINTS['High']} points if it is your top item, {POINTS['Medium']} "
        f"if second and {POINTS['Low']} if last; walking away gives both sides {WALK_AWAY_POINTS} points."
    )
    return {"text": text, "slots": slots, "private": private}


def _deal(task_data: Any, where: str) -> dict[str, dict[str, int]]:
    """A submitted deal from the submitter's side, quantities as ints."""
    if not isinstance(task_data, dict):
        raise SourceFieldError(where, "a Submit-Deal needs task_data with issue2youget/issue2theyget")
    deal: dict[str, dict[str, int]] = {}
    for side in ("issue2youget", "issue2theyget"):
        shares = task_data.get(side)
        if not isinstance(shares, dict) or sorted(shares) != sorted(ISSUES):
            raise SourceFieldError(f"{where}.{side}", f"expected a count for each of {list(ISSUES)}")
        deal[side] = {}
        for name in ISSUES:
            try:
                count = int(shares[name])
            except (TypeError, ValueError):
                raise SourceFieldError(f"{where}.{side}.{name}", f"not a count: {shares[name]!r}") from None
            if not 0 <= count <= PACKAGES_PER_ISSUE:
                raise SourceFieldError(
                    f"{where}.{side}.{name}", f"count {count} outside 0..{PACKAGES_PER_ISSUE}"
                )
            deal[side][name] = count
    return deal


def _flip(deal: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {"issue2youget": deal["issue2theyget"], "issue2theyget": deal["issue2youget"]}


def _shares(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts[name]} {name}" for name in ISSUES)


def _render(kind: str, deal_for_speaker: dict[str, dict[str, int]] | None) -> str:
    if kind == "submit_deal" and deal_for_speaker:
        return (
            f"Submit-Deal: I get {_shares(deal_for_speaker['issue2youget'])}; "
            f"you get {_shares(deal_for_speaker['issue2theyget'])}."
        )
    return {
        "accept_deal": "Accept-Deal: I accept your deal.",
        "reject_deal": "Reject-Deal: I reject your deal.",
        "walk_away": "Walk-Away: I walk away without a deal.",
    }[kind]


def _strategies(logs: list[dict[str, Any]], annotations: Any) -> dict[int, list[str]]:
    """Strategy labels per chat_logs index, aligned in order by normalised text.

    The published annotations list each non-deal message in order, but a few skip one; a label is
    attached only where the text matches, looking a few annotations ahead to step over a gap.
    """
    if not isinstance(annotations, list):
        return {}
    pairs = [
        (_norm(str(a[0])), [label for label in str(a[1]).split(",") if label])
        for a in annotations
        if isinstance(a, list | tuple) and len(a) >= 2
    ]
    labels: dict[int, list[str]] = {}
    cursor = 0
    for index, message in enumerate(logs):
        if message["text"] in DEAL_MESSAGES:
            continue
        text = _norm(message["text"])
        for ahead in range(cursor, min(cursor + 3, len(pairs))):
            if pairs[ahead][0] == text:
                if pairs[ahead][1]:
                    labels[index] = pairs[ahead][1]
                cursor = ahead + 1
                break
    return labels


def _chat_logs(dialogue: dict[str, Any], where: str) -> list[dict[str, Any]]:
    logs = dialogue.get("chat_logs")
    if not isinstance(logs, list) or not logs:
        raise SourceFieldError(f"{where}.chat_logs", "expected a non-empty list of messages")
    for j, message in enumerate(logs):
        if not isinstance(message, dict):
            raise SourceFieldError(f"{where}.chat_logs[{j}]", "expected an object")
        if message.get("id") not in PARTICIPANTS:
            raise SourceFieldError(
                f"{where}.chat_logs[{j}].id",
                f"unknown speaker {message.get('id')!r}; expected one of {list(PARTICIPANTS)}",
            )
        text = message.get("text")
        if not isinstance(text, str) or not text.strip():
            raise SourceFieldError(f"{where}.chat_logs[{j}].text", "empty or not a string")
    return logs


def _view(dialogue: dict[str, Any], logs: list[dict[str, Any]], user: str, where: str) -> dict[str, Any]:
    """One participant's view as a Conversation dict (`you` in every action is this user)."""
    partner = PARTICIPANTS[1] if user == PARTICIPANTS[0] else PARTICIPANTS[0]
    info = dialogue["participant_info"]
    strategies = _strategies(logs, dialogue.get("annotations"))
    turns: list[dict[str, Any]] = []
    pending: dict[str, dict[str, int]] | None = None  # last submitted deal, from the user's side
    final_deal: dict[str, dict[str, int]] | None = None
    walked_away = False
    for j, message in enumerate(logs):
        by_user = message["id"] == user
        meta: dict[str, Any] = {}
        kind = DEAL_MESSAGES.get(message["text"])
        if kind is None:
            content = message["text"].strip()
        else:
            speaker_deal = None
            if kind == "submit_deal":
                speaker_deal = _deal(message.get("task_data"), f"{where}.chat_logs[{j}].task_data")
                pending = speaker_deal if by_user else _flip(speaker_deal)
                action: dict[str, Any] = {"type": kind, **pending}
            elif kind in ("accept_deal", "reject_deal"):
                if pending is None:
                    raise SourceFieldError(
                        f"{where}.chat_logs[{j}].text", f"{message['text']} with no deal on the table"
                    )
                action = {"type": kind, **pending}
                if kind == "accept_deal":
                    final_deal = pending
                pending = None
            else:
                action = {"type": kind}
                walked_away = True
            meta["action"] = {**action, "by": "user" if by_user else "assistant"}
            content = _render(kind, speaker_deal)
        if j in strategies:
            meta["strategies"] = strategies[j]
        turns.append({"role": "user" if by_user else "assistant", "content": content, "meta": meta})

    mine, theirs = info[user].get("outcomes") or {}, info[partner].get("outcomes") or {}
    outcome = {
        "points_scored": mine.get("points_scored"),
        "satisfaction": mine.get("satisfaction"),
        "opponent_likeness": mine.get("opponent_likeness"),
        "partner_points_scored": theirs.get("points_scored"),
        "partner_satisfaction": theirs.get("satisfaction"),
        "partner_opponent_likeness": theirs.get("opponent_likeness"),
        "agreed": final_deal is not None,
        "walked_away": walked_away,
        "deal": final_deal,
    }
    letter = "a" if user == PARTICIPANTS[0] else "b"
    return {
        "conversation_id": f"{SOURCE}-{dialogue['dialogue_id']}-{letter}",
        "source": SOURCE,
        "domain": DOMAIN,
        "persona": {
            "pair_id": f"{SOURCE}-{dialogue['dialogue_id']}",
            "view": letter,
            "participant": user,
            "personality": info[user].get("personality"),
            "demographics": info[user].get("demographics"),
        },
        "goal": _goal(info[user]),
        "outcome": {key: value for key, value in outcome.items() if value is not None},
        "turns": turns,
    }


def _map_dialogue(path: Path, index: int, dialogue: Any) -> Iterator[Item]:
    where = f"[{index - 1}]"
    raw = raw_json(dialogue)
    try:
        if not isinstance(dialogue, dict):
            raise SourceFieldError(where, f"expected an object, got {type(dialogue).__name__}")
        if not isinstance(dialogue.get("dialogue_id"), int | str) or dialogue.get("dialogue_id") == "":
            raise SourceFieldError(f"{where}.dialogue_id", "missing")
        where = f"[{index - 1}] (dialogue {dialogue['dialogue_id']})"
        info = dialogue.get("participant_info")
        if not isinstance(info, dict):
            raise SourceFieldError(f"{where}.participant_info", "missing")
        for name in PARTICIPANTS:
            _participant(info.get(name), f"{where}.participant_info.{name}")
        logs = _chat_logs(dialogue, where)
        views = [_view(dialogue, logs, user, where) for user in PARTICIPANTS]
    except SourceFieldError as err:
        yield BadRecord(str(path), index, err.field, err.reason, raw)
        return
    for data in views:
        yield build_conversation(
            data, path=path, line=index, where=f"{where} (view {data['persona']['view']})", raw=raw
        )


def read_file(path: Path) -> Iterator[Item]:
    """Items of one CaSiNo-format file, in the file's order."""
    for index, dialogue in enumerate(load_json_document(path, list), start=1):
        yield from _map_dialogue(path, index, dialogue)


ADAPTER = Adapter(name="casino", read_file=read_file, suffixes=(".json",))
