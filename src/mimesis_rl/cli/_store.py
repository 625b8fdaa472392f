"""Commands that read a model from the MLflow store open it the way stages do.

Why here: a stale run (its process killed) is reaped by whichever command opens the store next
(`tracking.runs.sweep_once`). Stages, the pipeline, `sim eval` and `lineage` open it through
`tracking`; a command that only downloads a `models:/` URI reaches the store through
`models.inference.sources`, which sits below `tracking` and must not import it, so the command
sweeps before it loads.
"""

from __future__ import annotations

from mimesis_rl.models.inference.sources import MLFLOW_SCHEMES


def sweep_if_store(*specs: str | None) -> None:
    """Reap stale runs once when any spec (a model, an agent or user spec) names an MLflow URI."""
    if any(spec and any(scheme in spec for scheme in MLFLOW_SCHEMES) for spec in specs):
        from mimesis_rl.tracking.runs import sweep_once

        sweep_once()
