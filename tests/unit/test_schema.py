"""The conversation contract: what it accepts, and the field path it names when it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from mimesis_rl.data.jsonl import explain_validation_error
from mimesis_rl.data.schema import PATTERN_NAMES, Conversation, GoalCard, Turn


def record(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "conversation_id": "c1",
        "source": "fixture",
        "domain": "travel",
        "persona": {"age": 40},
        "goal": {"text": "a quiet hotel", "slots": {"budget": 120, "city": "Oslo"}, "private": ["budget"]},
        "outcome": {"booked": True},
        "turns": [
            {
                "role": "user",
                "content": "something nice for my trip",
                "patterns": ["vague_request"],
                "reasoning": "I do not want to say my budget yet",
            },
            {"role": "assistant", "content": "Where are you going?", "meta": {"latency_ms": 12}},
        ],
    }
    base.update(changes)
    return base


def failure(data: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ValidationError) as info:
        Conversation.model_validate(data)
    return explain_validation_error(info.value)


def test_good_record_round_trips() -> None:
    conv = Conversation.model_validate(record())
    assert [t.role for t in conv.user_turns] == ["user"]
    assert conv.goal == GoalCard(
        text="a quiet hotel", slots={"budget": 120, "city": "Oslo"}, private=["budget"]
    )
    again = Conversation.model_validate_json(conv.model_dump_json(exclude_none=True))
    assert again == conv


def test_optional_parts_may_be_absent() -> None:
    conv = Conversation.model_validate(
        {
            "conversation_id": "c",
            "source": "s",
            "domain": "d",
            "turns": [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "yo"}],
        }
    )
    assert conv.goal is None and conv.persona is None and conv.turns[1].patterns == []


def test_all_thirteen_patterns_are_accepted() -> None:
    assert len(PATTERN_NAMES) == 13
    Turn(role="user", content="x", patterns=list(PATTERN_NAMES))


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        (
            {"turns": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]},
            "turns[1].role",
            "Input should be 'user' or 'assistant'",
        ),
        (
            {"turns": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "  \n"}]},
            "turns[1].content",
            "content is empty",
        ),
        (
            {
                "turns": [
                    {"role": "user", "content": "a", "patterns": ["sarcasm"]},
                    {"role": "assistant", "content": "b"},
                ]
            },
            "turns[0].patterns",
            "unknown pattern names ['sarcasm']",
        ),
        (
            {
                "turns": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b", "patterns": ["refusal"]},
                ]
            },
            "turns[1]",
            "patterns are allowed on user turns only",
        ),
        ({"turns": [{"role": "user", "content": "only one"}]}, "turns", "at least 2 items"),
        (
            {"turns": [{"role": "user", "content": 5}, {"role": "assistant", "content": "b"}]},
            "turns[0].content",
            "valid string",
        ),
        ({"conversation_id": ""}, "conversation_id", "at least 1 character"),
        ({"goal": {"text": "x", "slots": {"a": 1}, "private": ["b"]}}, "goal", "private names ['b']"),
        ({"mood": "happy"}, "mood", "Extra inputs are not permitted"),
    ],
)
def test_bad_records_name_the_field(change: dict[str, Any], field: str, reason: str) -> None:
    got_field, got_reason = failure(record(**change))
    assert got_field == field
    assert reason in got_reason


def test_missing_required_field() -> None:
    data = record()
    del data["domain"]
    assert failure(data) == ("domain", "Field required")
