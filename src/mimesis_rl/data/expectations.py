"""The Great Expectations suites of the data contract, run over flat tables.

Every parsed conversation becomes one row of the `conversations` table and one row per turn in
the `turns` table. Both carry the conversation id and the source line, which GX reports for each
failing row (result format COMPLETE with `unexpected_index_column_names`), so a failure maps back
to the record it came from. Each expectation's `meta` says which field it guards, what a failure
means in words and whether it quarantines the record, only flags it or redacts it (PII).
A third suite, `duplicates`, runs last over the records nothing else quarantined: the first valid
occurrence of an id or of the same turns stays, later ones point at it.

Turn text reaches GX only as a length, PII counts per kind, and (when blank) the blank value, so
the GX result JSON and the Data Docs never copy personal data.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from mimesis_rl.data.chars import describe, suspicious_chars
from mimesis_rl.data.pii import DESCRIPTIONS, KINDS, count_pii
from mimesis_rl.data.schema import PATTERN_NAMES, ROLES, Conversation

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import great_expectations as gx  # noqa: E402  (after the telemetry switch)
import great_expectations.expectations as gxe  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402
from great_expectations.expectations.row_conditions import Column  # noqa: E402

log = logging.getLogger(__name__)
if logging.getLogger("great_expectations").level == logging.NOTSET:
    logging.getLogger("great_expectations").setLevel(logging.WARNING)  # its INFO is per-save chatter

CONVERSATIONS = "conversations"
TURNS = "turns"
DUPLICATES = "duplicates"
INDEX_COLUMNS: dict[str, list[str]] = {
    CONVERSATIONS: ["conversation_id", "line"],
    DUPLICATES: ["conversation_id", "line"],
    TURNS: ["conversation_id", "line", "turn"],
}
PiiAction = Literal["flag", "quarantine", "redact"]
PII_ACTIONS: tuple[str, ...] = ("flag", "quarantine", "redact")


@dataclass(frozen=True)
class Bounds:
    """Length and count limits of the suite (the `validate` section of params.yaml)."""

    min_chars: int = 1
    max_chars: int = 4000
    min_turns: int = 2
    max_turns: int = 200


@dataclass(frozen=True)
class Finding:
    """One failed expectation on one row, mapped back to its record."""

    line: int
    conversation_id: str
    check: str
    field: str
    reason: str
    action: str  # quarantine | flag | redact
    turn: int | None = None

    @property
    def is_pii(self) -> bool:
        return self.check.startswith("pii_")


@dataclass
class SuiteOutcome:
    """The GX results of both tables and every failing row they name."""

    results: dict[str, dict[str, Any]]
    findings: list[Finding] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return all(result["success"] for result in self.results.values())


class TableBuilder:
    """Collects parsed conversations into the two column-oriented tables the suite reads."""

    def __init__(self) -> None:
        self._conv: dict[str, list[Any]] = {k: [] for k in (
            "conversation_id", "line", "source", "domain", "n_turns", "n_user_turns", "turns_key")}
        self._turns: dict[str, list[Any]] = {k: [] for k in (
            "conversation_id", "line", "turn", "role", "content", "content_length", "patterns",
            "suspicious_chars", *(f"pii_{kind}" for kind in KINDS))}

    def add(self, line: int, conversation: Conversation) -> None:
        cid = conversation.conversation_id
        digest = hashlib.blake2b(digest_size=16)
        n_user = 0
        turns = self._turns
        for index, turn in enumerate(conversation.turns):
            turns["conversation_id"].append(cid)
            turns["line"].append(line)
            turns["turn"].append(index)
            turns["role"].append(turn.role)
            # Only blank content is ever reported by value; longer text is checked through its
            # length and its PII counts, so no personal data reaches the GX result or Data Docs.
            turns["content"].append(turn.content if not turn.content.strip() else "<text>")
            turns["content_length"].append(len(turn.content))
            turns["suspicious_chars"].append("|".join(suspicious_chars(turn.content)) or None)
            pii = count_pii(turn.content)
            for kind in KINDS:
                turns[f"pii_{kind}"].append(pii.get(kind))
            turns["patterns"].append("|".join(turn.patterns) if turn.patterns else None)
            n_user += turn.role == "user"
            digest.update(f"{turn.role}\x1f{turn.content}\x1e".encode())
        conv = self._conv
        conv["conversation_id"].append(cid)
        conv["line"].append(line)
        conv["source"].append(conversation.source)
        conv["domain"].append(conversation.domain)
        conv["n_turns"].append(len(conversation.turns))
        conv["n_user_turns"].append(n_user)
        conv["turns_key"].append(digest.hexdigest())

    def frames(self) -> dict[str, pd.DataFrame]:
        turns = pd.DataFrame(self._turns)
        for kind in KINDS:
            turns[f"pii_{kind}"] = turns[f"pii_{kind}"].astype("Int64")
        return {CONVERSATIONS: pd.DataFrame(self._conv), TURNS: turns}


def duplicates_table(conversations: pd.DataFrame, quarantined: set[int] | frozenset[int] = frozenset(),
                     ) -> pd.DataFrame:
    """The records not already quarantined, each with the line of the first record it repeats.

    Like `drop_duplicates(keep="first")`: the first valid occurrence of an id, or of the same turns
    (roles and content) under another id, stays; each later one points at it. Records quarantined
    for other reasons take no part, so a copy of a bad record can be the one that stays valid.
    """
    table = conversations.loc[~conversations["line"].isin(quarantined),
                              ["conversation_id", "line", "turns_key"]].sort_values("line")
    # One pass in line order: a record stays unless its id or its turns belong to a record that
    # stayed. (Two separate keep-first passes are not enough: a record dropped for its turns
    # would still claim its id, and a later record with that id would point at a dropped line.)
    kept_ids: dict[str, int] = {}
    kept_turns: dict[str, int] = {}
    id_of: list[int | None] = []
    turns_of: list[int | None] = []
    for cid, line, key in zip(table["conversation_id"], table["line"], table["turns_key"], strict=True):
        first_id, first_turns = kept_ids.get(cid), kept_turns.get(key)
        if first_id is None and first_turns is None:
            kept_ids[cid] = kept_turns[key] = int(line)
        id_of.append(first_id)
        turns_of.append(first_turns)
    table["duplicate_id_of_line"] = pd.array(id_of, dtype="Int64")
    table["duplicate_of_line"] = pd.array(turns_of, dtype="Int64")
    return table.drop(columns="turns_key").reset_index(drop=True)


def build_suites(bounds: Bounds, pii_action: PiiAction = "flag") -> dict[str, gx.ExpectationSuite]:
    """The data contract as two GX suites; `meta` carries what each failure means."""

    def meta(check: str, field: str, reason: str, action: str = "quarantine") -> dict[str, str]:
        return {"check": check, "field": field, "reason": reason, "action": action}

    pattern_names = "|".join(PATTERN_NAMES)
    conversations = gx.ExpectationSuite(name=CONVERSATIONS, expectations=[
        gxe.ExpectColumnValuesToBeBetween(
            column="n_turns", min_value=bounds.min_turns, max_value=bounds.max_turns,
            meta=meta("turn_count", "turns",
                      f"number of turns outside [{bounds.min_turns}, {bounds.max_turns}]")),
        gxe.ExpectColumnValuesToBeBetween(
            column="n_user_turns", min_value=1,
            meta=meta("has_user_turn", "turns", "no user turn")),
    ])
    # Run last, over the records no other check quarantined (see `duplicates_table`).
    duplicates = gx.ExpectationSuite(name=DUPLICATES, expectations=[
        gxe.ExpectColumnValuesToBeNull(
            column="duplicate_id_of_line",
            meta=meta("unique_conversation_id", "conversation_id", "id used by an earlier record")),
        gxe.ExpectColumnValuesToBeNull(
            column="duplicate_of_line",
            meta=meta("duplicate_conversation", "turns", "same turns as an earlier record")),
    ])
    turns = gx.ExpectationSuite(name=TURNS, expectations=[
        gxe.ExpectColumnValuesToBeInSet(
            column="role", value_set=list(ROLES),
            meta=meta("role_in_set", "role", f"role not in {list(ROLES)}")),
        gxe.ExpectColumnValuesToMatchRegex(
            column="content", regex=r"\S",
            meta=meta("content_not_empty", "content", "content is empty")),
        gxe.ExpectColumnValuesToBeBetween(
            column="content_length", min_value=bounds.min_chars, max_value=bounds.max_chars,
            meta=meta("turn_length", "content",
                      f"content length outside [{bounds.min_chars}, {bounds.max_chars}] chars")),
        gxe.ExpectColumnValuesToMatchRegex(
            column="patterns", regex=rf"^(?:{pattern_names})(?:\|(?:{pattern_names}))*\Z",
            meta=meta("known_patterns", "patterns", "pattern name outside the taxonomy")),
        gxe.ExpectColumnValuesToBeNull(
            column="patterns", row_condition=Column("role") != "user",
            meta=meta("patterns_on_user_turns", "patterns", "patterns on a non-user turn")),
        gxe.ExpectColumnValuesToBeNull(
            column="suspicious_chars",
            meta=meta("suspicious_chars", "content", "content holds invisible characters that change what a "
                      "reader sees", "flag")),
        *(gxe.ExpectColumnValuesToBeNull(
            column=f"pii_{kind}",
            meta=meta(f"pii_{kind}", "content", f"content contains {DESCRIPTIONS[kind]}", pii_action))
          for kind in KINDS),
    ])
    return {CONVERSATIONS: conversations, TURNS: turns, DUPLICATES: duplicates}


@contextmanager
def gx_context(docs_dir: str | Path | None = None) -> Iterator[Any]:
    """An ephemeral context, or a file context in a temp dir whose Data Docs end up in `docs_dir`."""
    if docs_dir is None:
        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        yield context
        return
    with tempfile.TemporaryDirectory(prefix="mimesis-gx-") as tmp:
        context = gx.get_context(mode="file", project_root_dir=tmp)
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        context.enable_analytics(False)
        yield context
        context.build_data_docs()
        site = Path(context.root_directory) / "uncommitted" / "data_docs" / "local_site"
        _replace_tree(site, Path(docs_dir))


def _replace_tree(source: Path, target: Path) -> None:
    """Copy beside the target, then swap, so a reader never sees half a site or a stale one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def run_suites(tables: Mapping[str, pd.DataFrame], bounds: Bounds, pii_action: PiiAction = "flag",
               docs_dir: str | Path | None = None) -> SuiteOutcome:
    """Validate both tables, then the duplicates among the records that passed; map every unexpected
    row back to (line, conversation id, field)."""
    suites = build_suites(bounds, pii_action)
    results: dict[str, dict[str, Any]] = {}
    with gx_context(docs_dir) as context:
        source = context.data_sources.add_pandas("mimesis")

        def validate(name: str, frame: pd.DataFrame) -> None:
            batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("all")
            suite = context.suites.add(suites[name])
            definition = context.validation_definitions.add(
                gx.ValidationDefinition(name=name, data=batch, suite=suite))
            result = definition.run(
                batch_parameters={"dataframe": frame},
                result_format={"result_format": "COMPLETE",
                               "unexpected_index_column_names": INDEX_COLUMNS[name]})
            results[name] = result.to_json_dict()

        for name in (CONVERSATIONS, TURNS):
            validate(name, tables[name])
        findings = list(_findings(results))
        quarantined = {f.line for f in findings if f.action == "quarantine"}
        validate(DUPLICATES, duplicates_table(tables[CONVERSATIONS], quarantined))
    findings += _findings({DUPLICATES: results[DUPLICATES]})
    return SuiteOutcome(results=results, findings=findings)


def _findings(results: Mapping[str, Mapping[str, Any]]) -> Iterator[Finding]:
    for table, suite_result in results.items():
        for result in suite_result["results"]:
            config = result["expectation_config"]
            if result["success"]:
                continue
            meta = config.get("meta") or {}
            rows = (result.get("result") or {}).get("unexpected_index_list")
            if rows is None:
                exc = result.get("exception_info") or {}
                raise RuntimeError(f"GX expectation {config['type']} on {table} did not run: "
                                   f"{exc.get('exception_message') or 'no unexpected rows reported'}")
            yield from (_finding(row, config, meta) for row in rows)


def _finding(row: Mapping[str, Any], config: Mapping[str, Any], meta: Mapping[str, str]) -> Finding:
    column = config["kwargs"]["column"]
    value = row.get(column)
    turn = row.get("turn")
    field = meta["field"] if turn is None else f"turns[{turn}].{meta['field']}"
    reason = meta["reason"]
    if meta["check"] == "role_in_set":
        reason = f"role {value!r} not in {list(ROLES)}"
    elif meta["check"] == "turn_length":
        reason = f"{reason} ({value} chars)"
    elif meta["check"] == "turn_count":
        reason = f"{reason} ({value} turns)"
    elif meta["check"] == "duplicate_conversation":
        reason = f"same turns as the record on line {value}, which is kept"
    elif meta["check"] == "unique_conversation_id":
        reason = f"id {row['conversation_id']!r} already used on line {value}, which is kept"
    elif meta["check"] == "suspicious_chars":
        reason = f"content holds {describe(str(value).split('|'))}"
    elif meta["check"].startswith("pii_"):
        reason = f"{reason} ({value} found)"
    elif meta["check"] == "known_patterns":
        unknown = sorted(set(str(value).split("|")) - set(PATTERN_NAMES))
        reason = f"unknown pattern names {unknown}"
    return Finding(line=int(row["line"]), conversation_id=str(row["conversation_id"]), check=meta["check"],
                   field=field, reason=reason, action=meta["action"],
                   turn=None if turn is None else int(turn))
