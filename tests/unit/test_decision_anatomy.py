"""benchmarks.decision_anatomy reads the card user's grounded reasoning: its templates must match what
the environments' card users write, or every route would read as "no template"."""

from __future__ import annotations

import pytest

from benchmarks.decision_anatomy import TEMPLATES, anatomy, facts, follows_from
from mimesis_rl.envs.actions import reply_accepts
from mimesis_rl.simulator.curve import held_out_items
from mimesis_rl.simulator.decisions import replay_many


@pytest.mark.parametrize("domain", sorted(TEMPLATES))
def test_the_card_users_reasoning_parses_and_decides_by_its_numbers(domain: str) -> None:
    items = [item for item in held_out_items(12, [domain]) if item.kind != "question"]
    assert {item.expected_accept for item in items} == {True, False}
    rows = []
    for item, (_, reply) in zip(items, replay_many(items), strict=True):
        stated = facts(domain, reply.reasoning)
        assert stated is not None, reply.reasoning
        assert follows_from(domain, *stated)
        assert reply_accepts(reply) == (stated[1] in ("within", "enough")) == item.expected_accept
        rows.append({"domain": domain, "stated": stated[0], "word": stated[1], "truth": stated[0],
                     "truth_word": stated[1], "consistent": True, "accepted": reply_accepts(reply),
                     "expected": item.expected_accept})
    chain = anatomy(rows)
    assert chain["template"] == chain["facts"] == chain["verdict"] == chain["decision"] == 1.0
    assert chain["decision_without"] is None


def test_a_reply_without_the_template_or_with_a_wrong_verdict_is_told_apart() -> None:
    assert facts("bargain", "They're interested in $717.") is None
    stated = facts("bargain", "They offer $717; I'd pay at most $735, so $717 is over my $735 limit: no.")
    assert stated == ((735, 717), "over")
    assert not follows_from("bargain", *stated)
    short = "that's 19 points, and I need at least 20, so 19 is short of it"
    assert facts("campsite", short) == ((19, 20), "short")
