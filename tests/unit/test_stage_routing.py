"""The pipeline's routing decision: `training`-tagged stages (every expansion of a foreach group) go to
the GPU pool only while the Prefect API reports a live worker there; the rest always run here."""

from __future__ import annotations

from pathlib import Path

import pytest

import flows.pipeline as pipeline
from flows.pipeline import GPU_POOL, route, stage_tags

TRAINING = ("sim_sft", "sim_rl", "sim_panel@seed1", "agent_sft", "agent_rl@mimesis_csd")
OTHERS = ("params", "ingest", "validate", "split", "base_model", "label", "rationalize", "sim_eval",
          "agent_eval", "promote", "report", "evidence")


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    live: list[str] = []
    monkeypatch.setattr(pipeline, "live_workers", lambda pool: list(live) if pool == GPU_POOL else [])
    return live


def test_training_stages_are_tagged() -> None:
    assert all(stage_tags(s) == ["training"] for s in TRAINING)
    assert all(stage_tags(s) == [] for s in OTHERS)


def test_training_stages_go_to_the_gpu_pool_only_with_a_live_worker(workers: list[str]) -> None:
    for stage in TRAINING:
        assert route(stage) == ("local", f"training stage, but pool {GPU_POOL} has no live worker: CPU pool")
    workers.append("gpu-box-1")
    for stage in TRAINING:
        assert route(stage) == ("gpu", f"training stage, pool {GPU_POOL} has a live worker (gpu-box-1)")
    for stage in OTHERS:
        assert route(stage) == ("local", "not a training stage")


def test_gpu_stages_replace_the_tag(workers: list[str]) -> None:
    workers.append("w")
    assert route("ingest", ["ingest"])[0] == "gpu"
    assert route("agent_rl@mimesis", ["agent_rl"])[0] == "gpu"  # a group names every expansion
    assert route("sim_sft", ["ingest"]) == ("local", "not in gpu_stages")


def test_every_dvc_stage_group_is_known() -> None:
    """A stage added to dvc.yaml is either tagged `training` or deliberately not (listed above)."""
    import yaml

    groups = set(yaml.safe_load((Path(__file__).resolve().parents[2] / "dvc.yaml").read_text())["stages"])
    known = {s.split("@", 1)[0] for s in TRAINING + OTHERS}
    assert groups == known, groups ^ known
