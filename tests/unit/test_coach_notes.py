"""Coach notes are written beside the transcripts by the stage that plays them; the report reads them."""

from __future__ import annotations

from typing import Any

from mimesis_rl.eval.coach_notes import with_coach_notes
from mimesis_rl.report.dialogues import coach_notes


def _record(own_notes: bool) -> dict[str, Any]:
    meta = {"coach_note": "Ask about their budget."} if own_notes else {}
    return {
        "episode_id": "bargain-1",
        "domain": "bargain",
        "goal": {"text": "Buy the couch for at most $381.", "slots": {"reservation": 381},
                 "private": ["reservation"]},
        "end_reason": "user_left",
        "turns": [
            {"role": "user", "content": "hi", "reasoning": "I won't say my limit of 381.", "patterns": [],
             "meta": {}},
            {"role": "assistant", "content": "It is $490.", "reasoning": None, "patterns": [], "meta": meta},
            {"role": "user", "content": "too much, bye", "reasoning": "Way over 381.",
             "patterns": ["negotiation"], "meta": {}},
        ],
    }


def test_template_notes_one_per_agent_turn_without_private_values() -> None:
    (out,) = with_coach_notes([_record(own_notes=False)], horizon=2)
    written = out["coach_notes"]
    assert written["source"] == "template coach" and written["horizon"] == 2
    assert len(written["notes"]) == 1 and written["notes"][0] and "381" not in written["notes"][0]
    assert coach_notes(out) == (written["notes"], "template coach")


def test_a_transcript_own_notes_are_kept_and_the_input_is_not_changed() -> None:
    record = _record(own_notes=True)
    (out,) = with_coach_notes([record], horizon=2)
    assert out["coach_notes"]["notes"] == ["Ask about their budget."]
    assert out["coach_notes"]["source"] == "transcript"
    assert "coach_notes" not in record


def test_the_report_says_when_no_notes_were_written() -> None:
    assert coach_notes(_record(own_notes=False)) == ([], "none written")
