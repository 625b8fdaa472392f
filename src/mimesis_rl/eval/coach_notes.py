"""Coach notes for written transcripts: the stage that plays the dialogues (`agent_eval`, and
`sim_eval`'s environment part) writes them, so the report only reads them.

Each record gets `coach_notes: {"source", "horizon", "notes"}`, one note per agent turn: the
transcript's own (`meta.coach_note`) when every agent turn has one, else the template coach's
(`agent.coach.template.TemplateCoach`) from hindsight over `horizon` later user turns, with private slot
values redacted (a note tells the agent what to do, never the hidden facts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def coach_notes(record: Mapping[str, Any], horizon: int) -> tuple[list[str], str]:
    """One note per agent turn and who wrote it (`transcript` or `template coach`)."""
    agent_turns = [t for t in record["turns"] if t.get("role") == "assistant"]
    own = [(t.get("meta") or {}).get("coach_note") for t in agent_turns]
    if agent_turns and all(own):
        return [str(n) for n in own], "transcript"
    from mimesis_rl.agent.coach.context import contexts_from_record
    from mimesis_rl.agent.coach.leaks import redact
    from mimesis_rl.agent.coach.template import TemplateCoach

    contexts = contexts_from_record(record, horizon)
    notes = TemplateCoach().notes(contexts)
    return [redact(n, c.goal, c.slot_labels) for n, c in zip(notes, contexts, strict=True)], "template coach"


def with_coach_notes(records: Sequence[Mapping[str, Any]], horizon: int) -> list[dict[str, Any]]:
    """The records, each with its `coach_notes` (what the report shows beside the agent's turns)."""
    out = []
    for record in records:
        notes, source = coach_notes(record, horizon)
        out.append({**record, "coach_notes": {"source": source, "horizon": horizon, "notes": notes}})
    return out
