"""Section 4, sample dialogues: a varied pick of the transcripts, each turn with what stands beside
it (the user's private reasoning, the coach's note that the playing stage wrote)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mimesis_rl.report.cells import cut
from mimesis_rl.report.inputs import read_jsonl
from mimesis_rl.report.sections import Section, missing
from mimesis_rl.report.settings import ReportSettings


def coach_notes(record: Mapping[str, Any]) -> tuple[list[str], str]:
    """The notes the playing stage wrote beside the transcript (`eval.coach_notes`), one per agent
    turn, and who wrote them; none for a transcript written without them."""
    written = record.get("coach_notes") or {}
    return [str(n) for n in written.get("notes") or []], str(written.get("source") or "none written")


def _dialogue(record: Mapping[str, Any], settings: ReportSettings, origin: str) -> dict[str, Any]:
    notes, source = coach_notes(record)
    turns, k = [], 0
    for t in record["turns"]:
        role = t.get("role")
        entry = {
            "role": role,
            "text": cut(t.get("content"), settings.max_chars),
            "side": None,
            "patterns": [],
            "action": None,
        }
        if role == "user":
            entry["side"] = cut(t.get("reasoning"), settings.max_chars) or None
            entry["patterns"] = list(t.get("patterns") or [])
        elif role == "assistant":
            entry["side"] = notes[k] if k < len(notes) else None
            action = (t.get("meta") or {}).get("action")
            entry["action"] = json.dumps(action, ensure_ascii=False) if action else None
            k += 1
        turns.append(entry)
    goal = record.get("goal") or {}
    private = [s for s in goal.get("private") or [] if s in (goal.get("slots") or {})]
    return {
        "episode": record.get("episode_id"),
        "agent": record.get("agent"),
        "user": record.get("member") or record.get("user"),
        "domain": record.get("domain"),
        "seed": record.get("seed"),
        "success": record.get("success"),
        "reward": record.get("reward"),
        "end_reason": record.get("end_reason"),
        "goal": cut(goal.get("text"), 300),
        "private": private,
        "turns": turns,
        "coach": source,
        "origin": origin,
        "reasoning_turns": sum(1 for t in turns if t["role"] == "user" and t["side"]),
    }


def _user(record: Mapping[str, Any]) -> Any:
    return record.get("member") or record.get("user")


def pick_dialogues(records: Sequence[Mapping[str, Any]], n: int) -> list[Mapping[str, Any]]:
    """A readable, varied sample: dialogues whose user turns carry reasoning first, then round-robin
    over agents and users, alternating successes and failures, never the same domain twice in a row."""
    if n <= 0 or not records:
        return []

    def has_reasoning(r: Mapping[str, Any]) -> bool:
        return any(t.get("role") == "user" and (t.get("reasoning") or "").strip() for t in r["turns"])

    pool = sorted(
        records,
        key=lambda r: (
            not has_reasoning(r),
            str(r.get("agent")),
            str(r.get("member")),
            str(r.get("domain")),
            r.get("seed") or 0,
        ),
    )
    chosen: list[Mapping[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    want_success = True
    for _ in range(n):

        def rank(r: Mapping[str, Any], want: bool = want_success) -> tuple[Any, ...]:
            agents = sum(1 for c in chosen if c.get("agent") == r.get("agent"))
            users = sum(1 for c in chosen if _user(c) == _user(r))
            domains = sum(1 for c in chosen if c.get("domain") == r.get("domain"))
            return (not has_reasoning(r), agents + users + domains, bool(r.get("success")) != want)

        left = [
            r
            for r in pool
            if id(r) not in {id(c) for c in chosen}
            and (r.get("agent"), r.get("episode_id"), r.get("member")) not in seen
        ]
        if not left:
            break
        best = min(left, key=rank)
        chosen.append(best)
        seen.add((best.get("agent"), best.get("episode_id"), best.get("member")))
        want_success = not want_success
    return chosen


def dialogue_section(settings: ReportSettings) -> Section:
    """Sample dialogues from agent_eval's transcripts (trained agents vs unseen simulators), else from
    sim_eval's environment transcripts (the scripted agent vs each simulator)."""
    folder = Path(settings.agent_eval) / "transcripts"
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    origin = "agent_eval: trained agents against unseen simulators"
    if not files:
        env_file = Path(settings.sim_eval) / "environment_transcripts.jsonl"
        files = [env_file] if env_file.is_file() else []
        origin = "sim_eval: the scripted agent against each simulator (agent_eval transcripts not found)"
    if not files:
        return missing("dialogues", folder, Path(settings.sim_eval) / "environment_transcripts.jsonl")
    records = [r for f in files for r in read_jsonl(f)]
    picked = pick_dialogues(records, settings.dialogues)
    dialogues = [_dialogue(r, settings, origin) for r in picked]
    notes = []
    if dialogues and not any(d["reasoning_turns"] for d in dialogues):
        notes.append(
            "No user turn of these transcripts carries private reasoning (scripted or prompted users "
            "only, or the simulators wrote none)."
        )
    return Section(
        "dialogues",
        {"origin": origin, "dialogues": dialogues, "files": [str(f) for f in files], "total": len(records)},
        notes=notes,
    )
