"""A stage killed mid-training (SIGKILL: no handler runs) continues where it stopped when run again.

The tiny profile's `agent_sft`, as `make evidence` / `make run` run it (`python -m tasks.agent_sft` in a
checkout), is killed as soon as its first whole checkpoint is on disk (often while it writes the next
one). The rerun resumes from the newest
checkpoint rather than step 0, finishes, drops its checkpoints, and the killed run's MLflow record is
marked KILLED, with the reason, by the next process that opens the store (it could not mark itself).
A checkpoint the kill left half-written is skipped (tests/unit/test_checkpoint_resume.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import mlflow
import pytest
import yaml

from benchmarks._common import copy_checkout
from mimesis_rl.config import set_profile
from mimesis_rl.models.testing import TINY_TEST_CONFIG, make_tiny_base

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
MAX_STEPS, SAVE_STEPS = 40, 2


def _stage(project: Path, name: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(project),
           "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}"}
    return subprocess.Popen([sys.executable, "-m", f"tasks.{name}"], cwd=project, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_killed_training_stage_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    project = copy_checkout(REPO, tmp_path / "project")
    set_profile("tiny", project / "params.yaml")
    params = yaml.safe_load((project / "params.yaml").read_text())
    tiny = params["profiles"]["tiny"]
    tiny["agent_sft"].update(max_steps=MAX_STEPS, save_steps=SAVE_STEPS, eval_seeds=1)
    tiny["agent_sft"]["registry"] = {"register": False}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    # 1024 positions: room for a built-in domain's system prompt under the tiny tokenizer.
    config = replace(TINY_TEST_CONFIG, max_position_embeddings=1024)
    make_tiny_base(project / "models" / "base", config=config)

    first = _stage(project, "agent_sft")
    checkpoints = project / "checkpoints" / "agent_sft"
    try:
        while first.poll() is None and not list(checkpoints.glob("*/checkpoint-*/trainer_state.json")):
            time.sleep(0.05)
        assert first.poll() is None, "the stage finished before it could be killed"
        first.send_signal(signal.SIGKILL)
    finally:
        first.wait(timeout=60)
    whole = checkpoints.glob("*/checkpoint-*/trainer_state.json")
    saved = max(int(p.parent.name.split("-")[1]) for p in whole)
    assert 0 < saved < MAX_STEPS

    second = _stage(project, "agent_sft")
    assert second.wait(timeout=900) == 0, second.stderr.read() if second.stderr else ""
    metrics = json.loads((project / "metrics" / "agent_sft.json").read_text())
    assert metrics["resumed_from_step"] >= saved and metrics["steps"] == MAX_STEPS
    assert not list(checkpoints.glob("*/checkpoint-*"))  # dropped once the stage finished

    client = mlflow.MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string="tags.`mimesis.stage` = 'agent_sft'",
                              order_by=["attributes.start_time ASC"])
    assert [r.info.status for r in runs] == ["KILLED", "FINISHED"]
    assert "ended without closing this run" in runs[0].data.tags["mimesis.swept"]
