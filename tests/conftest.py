"""Shared fixtures: every test gets its own MLflow store; telemetry is off; nothing is downloaded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

for _key, _value in {
    "DVC_NO_ANALYTICS": "1",
    "GX_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "false",
}.items():
    os.environ.setdefault(_key, _value)

# Tests use tiny models, where a second thread costs more in synchronisation than it gains.
try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass

# Under pytest-xdist (`make test`: one worker per core) the stages a test starts get one torch thread
# too: two workers at two threads each would oversubscribe two cores, and OpenMP spins when it waits.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("MIMESIS_THREADS", "1")

# Hypothesis: bounded examples everywhere; in CI (CI=true) also derandomized, so a run is repeatable
# and a failure is found again on the next run. Tests set their own (small) max_examples.
try:
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", derandomize=True, deadline=None, max_examples=25, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", deadline=None, max_examples=25,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev")
except ImportError:  # pragma: no cover - a dev dependency
    pass

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_CASINO = REPO_ROOT.parent / "shared" / "data" / "casino"


@pytest.fixture(autouse=True)
def mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A private sqlite MLflow store per test, so tests never touch the project's mlflow.db."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MIMESIS_PARENT_RUN_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    mlflow.set_tracking_uri(uri)
    _forget_active_experiment()
    yield uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    _forget_active_experiment()


def _forget_active_experiment() -> None:
    """MLflow caches the active experiment id per process; a new store must not inherit it."""
    import mlflow.tracking.fluent as fluent

    fluent._active_experiment_id = None
    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def casino_dir() -> Path:
    if not (SHARED_CASINO / "casino_valid.json").exists():
        pytest.skip("CaSiNo data (../shared/data/casino) is not present")
    return SHARED_CASINO


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect backend for the whole session (starting one costs seconds)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
