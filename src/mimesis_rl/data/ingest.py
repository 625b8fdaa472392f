"""Ingest: run adapters over their sources, write the conversations and every reject with its reason.

Used by the `ingest` stage and by `mimesis data ingest`. Conversations stream straight to disk;
only the rejects are kept in memory. The bad share counts malformed source records only:
`Excluded` records (well-formed, but not a two-party dialogue) are written and counted apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.data.adapters import EMBEDDED, Excluded, Item, get_adapter
from mimesis_rl.data.jsonl import BadRecord, DataError, check_share, write_jsonl
from mimesis_rl.data.schema import Conversation
from mimesis_rl.data.splitting import group_id
from mimesis_rl.fsutil import PathError, check_distinct, check_not_inside, check_output_file
from mimesis_rl.settings import from_section


@dataclass(frozen=True)
class SourceSpec:
    """One input: an adapter name, a path (or `embedded`) and the adapter's options."""

    adapter: str
    input: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(cls, spec: Mapping[str, Any]) -> SourceSpec:
        if not isinstance(spec, Mapping) or "adapter" not in spec or "input" not in spec:
            raise DataError(f"ingest source {spec!r}: needs `adapter` and `input`")
        rest = {k: v for k, v in spec.items() if k not in ("adapter", "input")}
        return cls(str(spec["adapter"]), str(spec["input"]), rest)

    @property
    def label(self) -> str:
        return f"{self.adapter}:{self.input}"


@dataclass(frozen=True)
class IngestSettings:
    """The `ingest` stage (params.yaml `ingest:`): which sources, where the conversations and the rejects
    go, and the share of bad source records past which the stage fails."""

    sources: tuple[SourceSpec, ...]
    output: str
    rejects: str
    max_bad_share: float
    limit_per_source: int | None = None

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> IngestSettings:
        section = dict(section or {})
        sources = section.pop("sources", None)
        if sources is None:
            return from_section(cls, section, "ingest")  # names the missing key
        limit = section.get("limit_per_source")
        return from_section(cls, section, "ingest", sources=tuple(SourceSpec.from_params(s) for s in sources),
                            limit_per_source=None if limit is None else int(limit))


@dataclass
class IngestReport:
    """Counts of one ingest run, and the rejects in the order they were met."""

    conversations: int = 0
    source_records: int = 0  # source dialogues that gave at least one conversation
    turns: int = 0
    user_turns: int = 0
    by_source: Counter[str] = field(default_factory=Counter)
    by_domain: Counter[str] = field(default_factory=Counter)
    per_input: dict[str, dict[str, int]] = field(default_factory=dict)
    bad: list[tuple[SourceSpec, BadRecord]] = field(default_factory=list)
    excluded: list[tuple[SourceSpec, Excluded]] = field(default_factory=list)

    @property
    def records_read(self) -> int:
        return self.source_records + len(self.bad) + len(self.excluded)

    @property
    def bad_share(self) -> float:
        return len(self.bad) / self.records_read if self.records_read else 0.0

    def metrics(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "source_records": self.source_records,
            "records_read": self.records_read,
            "bad_records": len(self.bad),
            "excluded_records": len(self.excluded),
            "bad_share": round(self.bad_share, 6),
            "turns": self.turns,
            "user_turns": self.user_turns,
            "by_source": dict(sorted(self.by_source.items())),
            "by_domain": dict(sorted(self.by_domain.items())),
            "per_input": self.per_input,
        }

    def rejects(self) -> Iterator[dict[str, Any]]:
        for kind, items in (("bad", self.bad), ("excluded", self.excluded)):
            for spec, record in items:
                yield {"kind": kind, "adapter": spec.adapter, "input": spec.input, **record.to_quarantine()}

    def check(self, max_bad_share: float) -> None:
        """Raise DataError when nothing came through or the bad share passes the threshold."""
        check_share(max_bad_share, "max_bad_share")
        if self.conversations == 0:
            raise DataError(
                f"ingest produced no conversations ({len(self.bad)} bad, "
                f"{len(self.excluded)} excluded records)"
            )
        if self.bad_share > max_bad_share:
            first = "\n  ".join(str(record) for _, record in self.bad[:5])
            raise DataError(
                f"{len(self.bad)} of {self.records_read} source records are bad "
                f"({self.bad_share:.1%} > max_bad_share {max_bad_share:.1%}); first ones:\n  {first}"
            )


def _conversations(
    readers: list[tuple[SourceSpec, Iterator[Item]]], report: IngestReport, limit: int | None
) -> Iterator[Conversation]:
    for spec, items in readers:
        counts = report.per_input.setdefault(spec.label, {"conversations": 0, "bad": 0, "excluded": 0})
        groups: set[str] = set()
        for item in items:
            if isinstance(item, Excluded):
                report.excluded.append((spec, item))
                counts["excluded"] += 1
                continue
            if isinstance(item, BadRecord):
                report.bad.append((spec, item))
                counts["bad"] += 1
                continue
            group = group_id(item)
            if group not in groups:
                if limit is not None and len(groups) >= limit:
                    break
                groups.add(group)
                report.source_records += 1
            counts["conversations"] += 1
            report.conversations += 1
            report.turns += len(item.turns)
            report.user_turns += len(item.user_turns)
            report.by_source[item.source] += 1
            report.by_domain[item.domain] += 1
            yield item


def check_paths(specs: Iterable[SourceSpec], output: str | Path, rejects: str | Path) -> None:
    """Outputs must be writable, distinct from each other and from every input file, and outside
    every input folder (a folder input is read whole, so the next run would read them back)."""
    try:
        check_output_file(output, "output")
        check_output_file(rejects, "rejects")
        roles: dict[str, str | Path | None] = {"output": output, "rejects": rejects}
        for spec in specs:
            files = get_adapter(spec.adapter).files(spec.input)
            for n, path in enumerate(files):
                roles[f"input {spec.label}" + (f" (file {n + 1})" if len(files) > 1 else "")] = path
            if str(spec.input) != EMBEDDED and Path(spec.input).is_dir():
                check_not_inside({"output": output, "rejects": rejects}, spec.input, "input folder",
                                 "which is read whole")
        check_distinct(roles)
    except PathError as exc:
        raise DataError(str(exc)) from None


def ingest(
    specs: Iterable[SourceSpec], output: str | Path, rejects: str | Path, limit_per_source: int | None = None
) -> IngestReport:
    """Write every source's conversations to `output` and every reject to `rejects` (both always).

    `limit_per_source` caps the source dialogues taken from each input (both views of one
    dialogue count once). Unknown adapters, missing inputs and paths that would overwrite one
    another or an input raise DataError before any write.
    """
    specs = list(specs)
    readers = [(spec, get_adapter(spec.adapter).read(spec.input, **spec.options)) for spec in specs]
    check_paths(specs, output, rejects)
    report = IngestReport()
    write_jsonl(output, _conversations(readers, report, limit_per_source))
    write_jsonl(rejects, report.rejects())
    return report
