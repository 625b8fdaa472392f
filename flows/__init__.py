"""Prefect flows: `pipeline` (the whole DAG, on demand) and `retrain` (scheduled)."""
