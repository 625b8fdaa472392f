"""Train/val/test by conversation, stratified by (source, domain), seeded and deterministic.

Both views of one two-party conversation (same `persona.pair_id`) land in the same split, so no
real dialogue is seen in training from one side and evaluated from the other.

sklearn's `train_test_split(stratify=...)` refuses strata with a single member and has no notion
of groups; here each stratum's groups are shuffled with their own seeded RNG and cut by the
largest-remainder rule, so tiny strata simply go to the first split.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mimesis_rl.data.schema import Conversation
from mimesis_rl.settings import from_section

SPLITS: tuple[str, ...] = ("train", "val", "test")


@dataclass(frozen=True)
class SplitSettings:
    """The `split` stage (params.yaml `split:`): the validated conversations, the folder of
    `<split>.jsonl` (replaced whole) and each split's share, in the order given."""

    input: str
    output_dir: str
    fractions: dict[str, float]

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> SplitSettings:
        return from_section(cls, section, "split")


def group_id(conversation: Conversation) -> str:
    """The id shared by all views of one source dialogue (`persona.pair_id`, else the conversation id)."""
    persona = conversation.persona or {}
    return str(persona.get("pair_id") or conversation.conversation_id)


def check_fractions(fractions: Mapping[str, float]) -> dict[str, float]:
    """Non-negative fractions that sum to 1, in the order given."""
    if not fractions:
        raise ValueError("split fractions are empty")
    out = {str(name): float(value) for name, value in fractions.items()}
    negative = [name for name, value in out.items() if value < 0]
    if negative:
        raise ValueError(f"split fractions must be >= 0; negative: {negative}")
    if not math.isclose(sum(out.values()), 1.0, abs_tol=1e-6):
        raise ValueError(f"split fractions must sum to 1, got {sum(out.values()):.6f} from {out}")
    return out


def allocate(n: int, fractions: Mapping[str, float]) -> dict[str, int]:
    """Cut n items by the fractions, largest remainder first (ties go to the earlier split)."""
    quotas = {name: n * share for name, share in fractions.items()}
    counts = {name: math.floor(q) for name, q in quotas.items()}
    order = sorted(fractions, key=lambda name: (-(quotas[name] - counts[name]), list(fractions).index(name)))
    for name in order[: n - sum(counts.values())]:
        counts[name] += 1
    return counts


def split_conversations(
    conversations: Iterable[Conversation], fractions: Mapping[str, float], seed: int
) -> dict[str, list[Conversation]]:
    """Assign every conversation to one split; the result keeps the input order within each split.

    The outcome depends only on the set of conversations, the fractions and the seed, not on the
    input order.
    """
    fractions = check_fractions(fractions)
    conversations = list(conversations)
    groups: dict[str, tuple[str, str]] = {}
    for conv in conversations:
        groups.setdefault(group_id(conv), (conv.source, conv.domain))
    strata: dict[tuple[str, str], list[str]] = defaultdict(list)
    for gid, stratum in groups.items():
        strata[stratum].append(gid)

    where: dict[str, str] = {}
    for (source, domain), members in sorted(strata.items()):
        members.sort()
        random.Random(f"{seed}:{source}:{domain}").shuffle(members)
        start = 0
        for name, count in allocate(len(members), fractions).items():
            for gid in members[start : start + count]:
                where[gid] = name
            start += count

    out: dict[str, list[Conversation]] = {name: [] for name in fractions}
    for conv in conversations:
        out[where[group_id(conv)]].append(conv)
    return out


def split_summary(splits: Mapping[str, list[Conversation]]) -> dict[str, Any]:
    """Counts per split and per stratum, and the number of groups found in more than one split."""
    summary: dict[str, Any] = {"conversations": {}, "groups": {}, "by_stratum": {}}
    seen: dict[str, set[str]] = defaultdict(set)
    for name, convs in splits.items():
        summary["conversations"][name] = len(convs)
        gids = {group_id(c) for c in convs}
        summary["groups"][name] = len(gids)
        for gid in gids:
            seen[gid].add(name)
        for conv in convs:
            cell = summary["by_stratum"].setdefault(f"{conv.source}/{conv.domain}", {s: 0 for s in splits})
            cell[name] += 1
    summary["groups_in_several_splits"] = sum(1 for names in seen.values() if len(names) > 1)
    return summary
