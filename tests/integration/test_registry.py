"""Registry: a trained simulator is logged to a real sqlite MLflow store, registered as a new
version of `mimesis-simulator` with alias `candidate` and lineage tags, and
`models:/mimesis-simulator@candidate` loads and chats."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest
from sim_support import tiny_base, tiny_simulator

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import SessionSpec
from mimesis_rl.simulator.registry import REGISTERED_NAME, log_simulator, version_info
from mimesis_rl.simulator.runtime import UserSimulator
from mimesis_rl.tracking import stage_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_register_candidate_and_chat_from_the_registry(tmp_path: Path) -> None:
    base = tiny_base(tmp_path / "base")
    folder = tiny_simulator(base, tmp_path / "simulator", steps=1)
    with stage_run("sim_sft", {"profile": "test"}) as run:
        first = log_simulator(folder, data_version="md5:abc", parent_run_id="parent-123")
    with stage_run("sim_rl", {"profile": "test"}):
        second = log_simulator(folder, data_version="md5:def")
    assert (str(first.version), str(second.version)) == ("1", "2")

    info = version_info(REGISTERED_NAME, "candidate")
    assert info["version"] == "2"  # the newest version is the candidate
    first_tags = mlflow.MlflowClient().get_model_version(REGISTERED_NAME, "1").tags
    assert first_tags["mimesis.data_version"] == "md5:abc"
    assert first_tags["mimesis.parent_run_id"] == "parent-123"
    assert first_tags["mimesis.run_id"] == run.info.run_id
    assert first_tags["mimesis.kind"] == "lora" and first_tags["mimesis.base_bundled"] == "true"

    # Move the project's base away: the registered version carries its own copy.
    base.rename(tmp_path / "base-moved")
    sim = UserSimulator.load(f"models:/{REGISTERED_NAME}@candidate", device="cpu")
    sessions = sim.start([SessionSpec(goal=GoalCard(text="Find running shoes."), domain="shopping")])
    opening = sim.opening(sessions)[0]
    reply = sim.respond(sessions, ["Which size do you wear?"])[0]
    assert sim.manifest is not None and sim.manifest.kind == "lora"
    # A tiny model may not hold the format: then the session ends with its reason, never a broken turn.
    for turn in (opening, reply):
        assert turn.message or (turn.ended and turn.meta["end_reason"])
    assert len(sessions[0].messages) >= 3 or sessions[0].end_reason

    with pytest.raises(ValueError, match="cannot download"):
        UserSimulator.load(f"models:/{REGISTERED_NAME}@champion", device="cpu")


def test_log_simulator_needs_a_run(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="active MLflow run"):
        log_simulator(tmp_path)
