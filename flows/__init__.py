"""Prefect flows: `pipeline` (the whole DAG, on demand) and `retrain` (scheduled)."""

import os

# With no PREFECT_API_URL, Prefect starts a temporary local server; on a busy 2-core machine its
# default 20 s start-up allowance is too short.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
