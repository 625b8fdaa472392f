"""Stage `validate`: the schema and the Great Expectations suite over the ingested conversations.

    python -m tasks.validate [--profile tiny]

Writes the valid records, the quarantine (every bad record with its reasons and raw line), the GX
validation result JSON and the Data Docs site; fails past `validate.max_bad_share`, after writing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow

from mimesis_rl.data.validation import (
    TooManyBadRecords,
    ValidateStageSettings,
    ValidationReport,
    validate_file,
)
from tasks._runner import log_numeric_metrics, main

STAGE = "validate"


def inputs(params: dict[str, Any]) -> list[str]:
    return [ValidateStageSettings.from_section(params[STAGE]).input]


def _log_report(report: ValidationReport) -> None:
    if report.report_dir and Path(report.report_dir).is_dir():
        mlflow.log_artifacts(report.report_dir, artifact_path="validation")
    mlflow.set_tag("mimesis.validate.gx_success", str(report.gx_success).lower())


def run(params: dict[str, Any]) -> dict[str, Any]:
    settings = ValidateStageSettings.from_section(params[STAGE])
    try:
        report = validate_file(settings.input, settings.output, settings.quarantine,
                               report_dir=settings.report_dir, config=settings.checks)
    except TooManyBadRecords as exc:
        # The run ends FAILED; its numbers and the report still belong to it.
        log_numeric_metrics(exc.report.metrics())
        _log_report(exc.report)
        raise
    _log_report(report)
    return report.metrics()


if __name__ == "__main__":
    main(STAGE, run, inputs)
