"""A registered version whose base is not bundled names it by registry URI: the base is registered once
as `mimesis-base` (one version per content hash, reused), and the version loads and chats from an empty
folder with only the tracking URI set, also where the recorded path holds another base."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest
from sim_support import tiny_base, tiny_simulator

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import SessionSpec
from mimesis_rl.models.artifact import base_reference, read_manifest
from mimesis_rl.models.inference.sources import fetch, model_folder, resolve_base
from mimesis_rl.models.testing import make_tiny_base
from mimesis_rl.simulator.registry import BASE_HASH_TAG, BASE_NAME, REGISTERED_NAME, log_simulator
from mimesis_rl.simulator.runtime import UserSimulator
from mimesis_rl.tracking import content_hash, stage_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_base_registered_once_and_resolved_by_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tiny_base(tmp_path / "base")
    digest = content_hash(base)
    folder = tiny_simulator(base, tmp_path / "simulator", steps=1)
    with stage_run("sim_sft", {"profile": "test"}) as sft_run:
        first = log_simulator(folder, bundle="never")
    with stage_run("sim_rl", {"profile": "test"}):
        second = log_simulator(folder, bundle="auto", max_bundle_mb=0)  # too big to bundle: registered
    client = mlflow.MlflowClient()
    bases = client.search_model_versions(f"name = '{BASE_NAME}'")
    assert [(str(v.version), v.tags[BASE_HASH_TAG], v.run_id) for v in bases] == [
        ("1", digest, sft_run.info.run_id)]
    for version in (first, second):
        tags = client.get_model_version(REGISTERED_NAME, version.version).tags
        assert tags["mimesis.base_bundled"] == "false"
        assert tags["mimesis.base_uri"] == f"models:/{BASE_NAME}/1"

    monkeypatch.setenv("MIMESIS_CACHE_DIR", str(tmp_path / "cache"))
    downloaded = model_folder(fetch(f"models:/{REGISTERED_NAME}/2"))
    assert not (downloaded / "base").exists()
    manifest = read_manifest(downloaded)
    assert manifest.base["uri"] == f"models:/{BASE_NAME}/1" and manifest.base["md5"] == digest
    assert resolve_base(downloaded, manifest) == base  # the recorded path holds the recorded base: used

    # The path now holds another base (new data, new tokenizer): the registered one is fetched instead.
    shutil.move(base, tmp_path / "base-v1")
    make_tiny_base(base, texts=["another corpus, another tokenizer"] * 40)
    fetched = resolve_base(downloaded, manifest)
    assert fetched != base
    assert manifest.base["manifest"] == base_reference(fetched)["manifest"]
    for name in ("model.safetensors", "tokenizer.json"):
        assert content_hash(fetched / name) == content_hash(tmp_path / "base-v1" / name)

    # An empty folder, nothing but the tracking URI: the simulator and its base come from the registry.
    shutil.rmtree(base)
    shutil.rmtree(tmp_path / "cache")
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    monkeypatch.chdir(empty)
    sim = UserSimulator.load(f"models:/{REGISTERED_NAME}@candidate", device="cpu")
    sessions = sim.start([SessionSpec(goal=GoalCard(text="Find running shoes."), domain="shopping")])
    turn = sim.opening(sessions)[0]
    assert turn.message or (turn.ended and turn.meta["end_reason"])
    assert sorted(p.name for p in empty.iterdir()) == []  # nothing written into the working folder
    assert sim.manifest is not None and sim.manifest.base["uri"] == f"models:/{BASE_NAME}/1"


def test_bundle_choice_is_checked(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "mimesis.json").write_text(json.dumps({"kind": "full", "base": {}}))
    with stage_run("sim_sft", {"profile": "test"}), pytest.raises(ValueError, match="'sometimes'"):
        log_simulator(folder, bundle="sometimes")
