"""Label a conversations JSONL: `patterns` filled on every user turn, every other field left as it was.

Records are edited as parsed JSON (after schema validation), so fields the labeler does not own keep
their exact values and order. The output is written atomically: it appears whole or not at all. A
record that fails the schema (unknown pattern names included) or has no agent turn to give context
is either an error naming file, line and field (strict) or quarantined with its reason; the run
fails when the quarantined share exceeds `max_bad_share`.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mimesis_rl.behavior.context import ContextError, check_has_agent
from mimesis_rl.behavior.labelers.base import Labeler
from mimesis_rl.data.jsonl import BadRecord, DataError, explain_validation_error, iter_jsonl
from mimesis_rl.data.schema import PATTERN_NAMES, Conversation
from mimesis_rl.fsutil import atomic_open

log = logging.getLogger(__name__)


@dataclass
class LabelStats:
    """What a labelling pass saw: counts overall and per source and domain."""

    conversations: int = 0
    user_turns: int = 0
    quarantined: int = 0
    no_pattern: int = 0
    patterns: Counter[str] = field(default_factory=Counter)
    by_source: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    by_domain: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, conversation: Conversation, labels: list[tuple[str, ...]]) -> None:
        self.conversations += 1
        for key, table in ((conversation.source, self.by_source), (conversation.domain, self.by_domain)):
            table[key]["_user_turns"] += len(labels)
            for names in labels:
                table[key].update(names)
        self.user_turns += len(labels)
        for names in labels:
            self.patterns.update(names)
            self.no_pattern += not names

    def merge(self, other: LabelStats) -> None:
        self.conversations += other.conversations
        self.user_turns += other.user_turns
        self.quarantined += other.quarantined
        self.no_pattern += other.no_pattern
        self.patterns.update(other.patterns)
        for mine, theirs in ((self.by_source, other.by_source), (self.by_domain, other.by_domain)):
            for key, counts in theirs.items():
                mine[key].update(counts)

    @staticmethod
    def shares(table: dict[str, Counter[str]]) -> dict[str, dict[str, float]]:
        """group -> pattern -> share of that group's user turns showing the pattern."""
        out = {}
        for key, counts in sorted(table.items()):
            turns = max(counts["_user_turns"], 1)
            out[key] = {name: counts[name] / turns for name in PATTERN_NAMES}
            out[key]["user_turns"] = float(counts["_user_turns"])
        return out

    def as_metrics(self) -> dict[str, Any]:
        turns = max(self.user_turns, 1)
        return {
            "conversations": self.conversations,
            "user_turns": self.user_turns,
            "quarantined": self.quarantined,
            "no_pattern_share": self.no_pattern / turns,
            "share": {name: self.patterns[name] / turns for name in PATTERN_NAMES},
            "by_source": self.shares(self.by_source),
            "by_domain": self.shares(self.by_domain),
        }


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any] | BadRecord]]:
    for line, obj in iter_jsonl(path):
        if isinstance(obj, BadRecord):
            yield line, obj
            continue
        try:
            conversation = Conversation.model_validate(obj)
            check_has_agent(conversation, where=f"{path}:{line} {conversation.conversation_id}")
        except ValidationError as exc:
            field_path, reason = explain_validation_error(exc)
            yield line, BadRecord(str(path), line, field_path, reason, json.dumps(obj, ensure_ascii=False))
            continue
        except ContextError as exc:
            yield (
                line,
                BadRecord(
                    str(path),
                    line,
                    "turns",
                    str(exc).split(": turns: ", 1)[-1],
                    json.dumps(obj, ensure_ascii=False),
                ),
            )
            continue
        yield line, {"raw": obj, "conversation": conversation}


def label_file(
    source: str | Path,
    target: str | Path,
    labeler: Labeler,
    *,
    quarantine: list[dict[str, Any]] | None = None,
    max_bad_share: float = 0.0,
    chunk_size: int = 512,
    with_probabilities: bool = False,
) -> LabelStats:
    """Label `source` into `target` (atomically). Bad records raise DataError unless `quarantine` is a
    list, which then receives them with their reason; too many bad records still raise."""
    from tqdm.auto import tqdm

    source, target = Path(source), Path(target)
    stats = LabelStats()
    total = 0
    with source.open("rb") as raw_lines:
        expected = sum(1 for _ in raw_lines)
    progress = tqdm(total=expected, desc=f"labelling {source.name}", unit="conv", mininterval=15,
                    disable=expected < 2 * chunk_size)
    with progress, atomic_open(target) as handle:
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            results = labeler.label([item["conversation"] for item in batch])
            for item, turns in zip(batch, results, strict=True):
                raw = item["raw"]
                for labels in turns:
                    turn = raw["turns"][labels.turn_index]
                    turn["patterns"] = list(labels.patterns)
                    if with_probabilities:
                        turn.setdefault("meta", {})["pattern_probs"] = labels.probabilities
                stats.add(item["conversation"], [t.patterns for t in turns])
                handle.write(json.dumps(raw, ensure_ascii=False) + "\n")
            progress.update(len(batch))
            batch.clear()

        for _, item in _records(source):
            total += 1
            if isinstance(item, BadRecord):
                if quarantine is None:
                    raise DataError(str(item))
                quarantine.append(item.to_quarantine())
                stats.quarantined += 1
                log.warning("quarantined %s", item)
                continue
            batch.append(item)
            if len(batch) >= chunk_size:
                flush()
        if batch:
            flush()
        if total == 0:
            raise DataError(f"{source}: no records")
        if quarantine and stats.quarantined / total > max_bad_share:
            first = quarantine[-stats.quarantined]
            raise DataError(
                f"{source}: {stats.quarantined} of {total} records are bad "
                f"({stats.quarantined / total:.1%} > max_bad_share {max_bad_share:.1%}); first: line "
                f"{first['line']} {first['field']}: {first['reason']}"
            )
    return stats
