"""The taxonomy covers exactly the schema's 13 names, each with a usable definition and examples."""

from __future__ import annotations

import pytest

from mimesis_rl.behavior.taxonomy import (
    CONTEXT_PATTERNS,
    PATTERNS,
    Needs,
    describe,
    get_pattern,
    unknown_patterns,
)
from mimesis_rl.data.schema import PATTERN_NAMES


def test_names_are_the_schema_names_in_order() -> None:
    assert tuple(PATTERNS) == PATTERN_NAMES
    assert len(PATTERNS) == 13


@pytest.mark.parametrize("name", PATTERN_NAMES)
def test_every_pattern_is_documented(name: str) -> None:
    pattern = get_pattern(name)
    assert len(pattern.definition.split()) >= 8
    assert len(pattern.positives) >= 2 and len(pattern.negatives) >= 2
    assert pattern.cues
    positives = {e.user for e in pattern.positives}
    assert not positives & {e.user for e in pattern.negatives}


def test_context_dependent_patterns_say_what_they_need() -> None:
    assert Needs.AGENT_TURN in get_pattern("withholding_info").needs
    assert Needs.GOAL in get_pattern("intent_change").needs
    assert Needs.AGENT_TURN in get_pattern("privacy_concern").needs
    assert {"withholding_info", "intent_change", "privacy_concern"} <= set(CONTEXT_PATTERNS)
    assert "emotional_expression" not in CONTEXT_PATTERNS
    # examples of agent-turn patterns carry the agent turn they depend on
    assert all(e.agent for e in get_pattern("withholding_info").positives)


def test_unknown_names_are_reported() -> None:
    with pytest.raises(KeyError, match="unknown pattern 'sarcasm'.*vague_request"):
        get_pattern("sarcasm")
    assert unknown_patterns(["refusal", "sarcasm", "banter"]) == ["banter", "sarcasm"]


def test_describe_lists_every_pattern() -> None:
    text = describe()
    assert all(f"- {name}:" in text for name in PATTERN_NAMES)
    assert len(describe(compact=True)) < len(text)
