"""Splitting by conversation: seeded, deterministic, stratified, both views of a dialogue together."""

from __future__ import annotations

import random

import pytest

from mimesis_rl.data.schema import Conversation
from mimesis_rl.data.splitting import allocate, check_fractions, group_id, split_conversations, split_summary

FRACTIONS = {"train": 0.8, "val": 0.1, "test": 0.1}


def conv(cid: str, source: str, domain: str, pair: str | None = None) -> Conversation:
    return Conversation(
        conversation_id=cid,
        source=source,
        domain=domain,
        persona={"pair_id": pair} if pair else None,
        turns=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    )


def corpus() -> list[Conversation]:
    convs = []
    for i in range(40):  # two-party corpus: two views per dialogue
        convs += [
            conv(f"chat-{i}-a", "chitchat", "chitchat", f"chat-{i}"),
            conv(f"chat-{i}-b", "chitchat", "chitchat", f"chat-{i}"),
        ]
    for i in range(20):
        convs += [
            conv(f"cas-{i}-a", "casino", "campsite", f"cas-{i}"),
            conv(f"cas-{i}-b", "casino", "campsite", f"cas-{i}"),
        ]
    convs += [conv(f"log-{i}", "mylogs", "support") for i in range(10)]  # single-view records
    convs += [conv("lonely", "other", "misc")]  # a stratum of one
    return convs


def ids(splits: dict[str, list[Conversation]]) -> dict[str, list[str]]:
    return {name: [c.conversation_id for c in convs] for name, convs in splits.items()}


def test_every_conversation_lands_in_exactly_one_split() -> None:
    convs = corpus()
    splits = split_conversations(convs, FRACTIONS, seed=7)
    assigned = [cid for names in ids(splits).values() for cid in names]
    assert sorted(assigned) == sorted(c.conversation_id for c in convs)


def test_both_views_share_a_split() -> None:
    splits = split_conversations(corpus(), FRACTIONS, seed=7)
    assert split_summary(splits)["groups_in_several_splits"] == 0
    where = {group_id(c): name for name, convs in splits.items() for c in convs}
    for name, convs in splits.items():
        assert all(where[group_id(c)] == name for c in convs)


def test_stratified_by_source_and_domain() -> None:
    summary = split_summary(split_conversations(corpus(), FRACTIONS, seed=7))
    strata = summary["by_stratum"]
    assert strata["chitchat/chitchat"] == {"train": 64, "val": 8, "test": 8}  # 40 dialogues: 32/4/4, x2 views
    assert strata["casino/campsite"] == {"train": 32, "val": 4, "test": 4}  # 20 dialogues: 16/2/2
    assert strata["mylogs/support"] == {"train": 8, "val": 1, "test": 1}
    assert strata["other/misc"] == {"train": 1, "val": 0, "test": 0}  # too small to cut
    assert summary["groups"] == {"train": 32 + 16 + 8 + 1, "val": 7, "test": 7}


def test_seeded_and_independent_of_input_order() -> None:
    convs = corpus()
    first = ids(split_conversations(convs, FRACTIONS, seed=7))
    shuffled = convs[:]
    random.Random(0).shuffle(shuffled)
    again = ids(split_conversations(shuffled, FRACTIONS, seed=7))
    assert {k: sorted(v) for k, v in first.items()} == {k: sorted(v) for k, v in again.items()}
    other = ids(split_conversations(convs, FRACTIONS, seed=8))
    assert {k: sorted(v) for k, v in other.items()} != {k: sorted(v) for k, v in first.items()}


def test_adding_a_stratum_leaves_the_others_alone() -> None:
    base = [c for c in corpus() if c.source != "mylogs"]
    before = ids(split_conversations(base, FRACTIONS, seed=3))
    after = ids(split_conversations(corpus(), FRACTIONS, seed=3))
    for name in FRACTIONS:
        assert [cid for cid in after[name] if not cid.startswith("log-")] == before[name]


def test_allocate_uses_largest_remainders() -> None:
    assert allocate(10, FRACTIONS) == {"train": 8, "val": 1, "test": 1}
    assert allocate(1, FRACTIONS) == {"train": 1, "val": 0, "test": 0}
    assert allocate(7, FRACTIONS) == {"train": 5, "val": 1, "test": 1}  # 5.6/0.7/0.7
    assert allocate(6, FRACTIONS) == {"train": 5, "val": 1, "test": 0}  # 4.8/0.6/0.6: a tie goes to val
    assert allocate(0, FRACTIONS) == {"train": 0, "val": 0, "test": 0}
    assert sum(allocate(13, {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}).values()) == 13


@pytest.mark.parametrize(
    ("fractions", "message"),
    [({"train": 0.8, "val": 0.1}, "sum to 1"), ({"train": 1.1, "val": -0.1}, ">= 0"), ({}, "empty")],
)
def test_bad_fractions(fractions: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_fractions(fractions)
