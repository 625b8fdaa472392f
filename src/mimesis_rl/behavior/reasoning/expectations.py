"""Great Expectations checks on written reasoning output: what the `rationalize` stage promises.

Each user turn of the written JSONL becomes a row (conversation id, file line, turn index). The suite
expects: pattern names inside the taxonomy, a reasoning trace on every user turn that is not blank,
and a trace that differs from the message. "Differs" is the shared repetition rule
(`checks.repetition_problem`), computed per row into a column that GX expects to be null, so a
failing row names its conversation and turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mimesis_rl.behavior.reasoning.checks import DEFAULT_MAX_OVERLAP, repetition_problem
from mimesis_rl.data.expectations import gx, gx_context, gxe
from mimesis_rl.data.jsonl import BadRecord, DataError, iter_jsonl
from mimesis_rl.data.schema import PATTERN_NAMES

INDEX_COLUMNS = ["conversation_id", "line", "turn"]
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
    """The GX result of one output file and every failing turn it names."""

    path: str
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
        head = f"{self.path}: reasoning output check failed on {len(self.failures)} user turn(s):"
        raise DataError(head + "\n  " + "\n  ".join(lines) + more)


def user_turn_table(path: str | Path, max_overlap: float = DEFAULT_MAX_OVERLAP) -> pd.DataFrame:
    """One row per user turn of a written JSONL, read as plain JSON (so the file itself is checked)."""
    rows: dict[str, list[Any]] = {k: [] for k in (*INDEX_COLUMNS, "patterns", "reasoning", "repetition")}
    for line, record in iter_jsonl(path):
        if isinstance(record, BadRecord):
            raise DataError(str(record))
        for index, turn in enumerate(record.get("turns") or []):
            if not isinstance(turn, dict) or turn.get("role") != "user":
                continue
            reasoning = turn.get("reasoning")
            patterns = turn.get("patterns") or []
            rows["conversation_id"].append(str(record.get("conversation_id")))
            rows["line"].append(line)
            rows["turn"].append(index)
            rows["patterns"].append("|".join(map(str, patterns)) if patterns else None)
            rows["reasoning"].append(reasoning)
            message = str(turn.get("content", ""))
            problem = None if reasoning is None else repetition_problem(reasoning, message, max_overlap)
            rows["repetition"].append(problem)
    return pd.DataFrame(rows)


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


def check_reasoning_output(path: str | Path, max_overlap: float = DEFAULT_MAX_OVERLAP) -> ReasoningCheck:
    """Run the suite over one written file; every failing row comes back as a `Failure`."""
    table = user_turn_table(path, max_overlap)
    with gx_context() as context:
        batch = (context.data_sources.add_pandas("reasoning").add_dataframe_asset("user_turns")
                 .add_batch_definition_whole_dataframe("all"))
        suite = context.suites.add(build_suite())
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name="reasoning_output", data=batch, suite=suite))
        result = definition.run(batch_parameters={"dataframe": table},
                                result_format={"result_format": "COMPLETE",
                                               "unexpected_index_column_names": INDEX_COLUMNS}).to_json_dict()
    return ReasoningCheck(path=str(path), rows=len(table), result=result,
                          failures=list(_failures(str(path), result)))


def _failures(path: str, result: dict[str, Any]) -> Iterator[Failure]:
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
            yield Failure(path=path, line=int(row["line"]), conversation_id=str(row["conversation_id"]),
                          turn=int(row["turn"]), check=meta["check"], reason=reason)
