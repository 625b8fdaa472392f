"""Stage `ingest`: run the adapters named in params.yaml over their sources.

    python -m tasks.ingest [--profile tiny]

Writes `data/raw/conversations.jsonl` and `data/raw/ingest_rejects.jsonl` (every source record an
adapter could not map, with file, line, field and reason). Fails when the share of bad source
records exceeds `ingest.max_bad_share`, naming the first ones.
"""

from __future__ import annotations

import logging
from typing import Any

from mimesis_rl.data.adapters import get_adapter
from mimesis_rl.data.ingest import IngestSettings, ingest
from mimesis_rl.data.jsonl import DataError, check_share
from tasks._runner import main

STAGE = "ingest"
log = logging.getLogger("mimesis.ingest")


def inputs(params: dict[str, Any]) -> list[str]:
    """The files behind every source (embedded corpora resolved), for the run's lineage tags."""
    paths: list[str] = []
    for spec in IngestSettings.from_section(params[STAGE]).sources:
        try:
            paths += [str(p) for p in get_adapter(spec.adapter).files(spec.input)]
        except DataError:
            paths.append(spec.input)  # run() reports it properly
    return paths


def run(params: dict[str, Any]) -> dict[str, Any]:
    settings = IngestSettings.from_section(params[STAGE])
    check_share(settings.max_bad_share, "ingest.max_bad_share")  # before any work
    report = ingest(settings.sources, settings.output, settings.rejects, settings.limit_per_source)
    metrics = report.metrics()
    log.info(
        "ingest: %d conversations from %d source records; %d bad, %d excluded (see %s)",
        report.conversations,
        report.source_records,
        len(report.bad),
        len(report.excluded),
        settings.rejects,
    )
    report.check(float(settings.max_bad_share))
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
