"""Great Expectations checks on written reasoning output: what the `rationalize` stage promises.

Each user turn of the written JSONL files becomes a row (file, line, conversation id, turn index). The suite
expects: pattern names inside the taxonomy, a reasoning trace on every user turn that is not blank,
and a trace that differs from the message. "Differs" is the shared repetition rule
(`checks.repetition_problem`), computed per row into a column that GX expects to be null, so a
failing row names its conversation and turn.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mimesis_rl.behavior.reasoning.checks import DEFAULT_MAX_OVERLAP, repetition_problem
from mimesis_rl.data.expectations import gx, gx_context, gxe
from mimesis_rl.data.jsonl import BadRecord, DataError, iter_jsonl
from mimesis_rl.data.schema import PATTERN_NAMES

INDEX_COLUMNS = ["path", "line", "conversation_id", "turn"]
SHOWN = 10


@dataclass(frozen=True)
class Failure:
    """One user turn that broke one expectation."""

    path: str
    line: int
    conversation_id: str
    turn: int
    check: str
    reason: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}: conversation {self.conversation_id!r} turn {self.turn}"
        return f"{where}: {self.reason}"


@dataclass
class ReasoningCheck:
    """The GX result over the output files and every failing turn it names."""

    paths: list[str]
    rows: int
    result: dict[str, Any]
    failures: list[Failure] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return bool(self.result.get("success")) and not self.failures

    def raise_if_failed(self) -> None:
        if self.success:
            return
        lines = [str(f) for f in self.failures[:SHOWN]]
        more = f"\n  ... and {len(self.failures) - SHOWN} more" if len(self.failures) > SHOWN else ""
        head = f"reasoning output check failed on {len(self.failures)} user turn(s):"
        raise DataError(head + "\n  " + "\n  ".join(lines) + more)


def user_turn_table(paths: Sequence[str | Path], max_overlap: float = DEFAULT_MAX_OVERLAP) -> pd.DataFrame:
    """One row per user turn of written JSONL files, read as plain JSON (the files themselves are checked)."""
    rows: dict[str, list[Any]] = {k: [] for k in (*INDEX_COLUMNS, "patterns", "reasoning", "repetition")}
    for path, line, record in _records(paths):
        for index, turn in enumerate(record.get("turns") or []):
            if not isinstance(turn, dict) or turn.get("role") != "user":
                continue
            reasoning = turn.get("reasoning")
            patterns = turn.get("patterns") or []
            rows["path"].append(path)
            rows["conversation_id"].append(str(record.get("conversation_id")))
            rows["line"].append(line)
            rows["turn"].append(index)
            rows["patterns"].append("|".join(map(str, patterns)) if patterns else None)
            rows["reasoning"].append(reasoning)
            message = str(turn.get("content", ""))
            blank = not isinstance(reasoning, str) or not reasoning.strip()  # other expectations catch these
            problem = None if blank else repetition_problem(reasoning, message, max_overlap)
            rows["repetition"].append(problem)
    return pd.DataFrame(rows)


def _records(paths: Sequence[str | Path]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    for path in paths:
        for line, record in iter_jsonl(path):
            if isinstance(record, BadRecord):
                raise DataError(str(record))
            yield str(path), line, record


def build_suite() -> gx.ExpectationSuite:
    names = "|".join(PATTERN_NAMES)
    return gx.ExpectationSuite(name="reasoning_output", expectations=[
        gxe.ExpectColumnValuesToMatchRegex(
            column="patterns", regex=rf"^(?:{names})(?:\|(?:{names}))*\Z",
            meta={"check": "known_patterns", "reason": "pattern name outside the taxonomy"}),
        gxe.ExpectColumnValuesToNotBeNull(
            column="reasoning", meta={"check": "has_reasoning", "reason": "user turn has no reasoning"}),
        gxe.ExpectColumnValuesToMatchRegex(
            column="reasoning", regex=r"\S",
            meta={"check": "reasoning_not_blank", "reason": "reasoning is blank"}),
        gxe.ExpectColumnValuesToBeNull(
            column="repetition",
            meta={"check": "reasoning_differs", "reason": "reasoning repeats the message"}),
    ])


def check_reasoning_output(paths: Sequence[str | Path],
                           max_overlap: float = DEFAULT_MAX_OVERLAP) -> ReasoningCheck:
    """Run the suite over the written files at once; every failing row comes back as a `Failure`."""
    table = user_turn_table(paths, max_overlap)
    with gx_context() as context:
        batch = (context.data_sources.add_pandas("reasoning").add_dataframe_asset("user_turns")
                 .add_batch_definition_whole_dataframe("all"))
        suite = context.suites.add(build_suite())
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name="reasoning_output", data=batch, suite=suite))
        result = definition.run(batch_parameters={"dataframe": table},
                                result_format={"result_format": "COMPLETE",
                                               "unexpected_index_column_names": INDEX_COLUMNS}).to_json_dict()
    return ReasoningCheck(paths=[str(p) for p in paths], rows=len(table), result=result,
                          failures=list(_failures(result)))


def _failures(result: dict[str, Any]) -> Iterator[Failure]:
    for item in result["results"]:
        if item["success"]:
            continue
        config = item["expectation_config"]
        meta = config.get("meta") or {}
        rows = (item.get("result") or {}).get("unexpected_index_list")
        if rows is None:
            exc = item.get("exception_info") or {}
            raise RuntimeError(f"GX expectation {config['type']} did not run: "
                               f"{exc.get('exception_message') or 'no unexpected rows reported'}")
        for row in rows:
            reason = meta["reason"]
            if meta["check"] == "reasoning_differs":
                reason = f"{reason} ({row.get('repetition')})"
            elif meta["check"] == "known_patterns":
                unknown = sorted(set(str(row.get("patterns")).split("|")) - set(PATTERN_NAMES))
                reason = f"unknown pattern names {unknown}"
            yield Failure(path=str(row["path"]), line=int(row["line"]),
                          conversation_id=str(row["conversation_id"]), turn=int(row["turn"]),
                          check=meta["check"], reason=reason)
