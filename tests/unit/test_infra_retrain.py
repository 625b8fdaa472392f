"""The retrain deployment's settings: cron from params.yaml, concurrency 1, one name per checkout."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.retrain import deployment, deployment_name, retrain_settings


def test_deployment_follows_params(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "profile": "tiny", "profiles": {"tiny": {}}, "pipeline": {"schedule_cron": "15 4 * * 2"}}))
    dep = deployment(tmp_path, profile="tiny")
    assert [s.schedule.cron for s in dep.schedules] == ["15 4 * * 2"]
    assert dep.concurrency_limit == 1 and dep.concurrency_options.collision_strategy == "ENQUEUE"
    assert dep.parameters == {"profile": "tiny", "root": str(tmp_path.resolve())}
    assert dep.name == deployment_name(tmp_path) != deployment_name(tmp_path / "other")


def test_retrain_settings() -> None:
    assert retrain_settings({})["source_stages"] == ["ingest"]
    custom = {"pipeline": {"retrain": {"source_stages": ["load"]}}}
    assert retrain_settings(custom)["source_stages"] == ["load"]
    with pytest.raises(ValueError, match="pipeline.retrain"):
        retrain_settings({"pipeline": {"retrain": ["ingest"]}})
