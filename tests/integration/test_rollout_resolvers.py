"""Model specs for `mimesis envs rollout`: folders and MLflow URIs, one shared base, the CLI end to end."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import mlflow
import pytest
import torch
from mlflow import MlflowClient
from peft import PeftModel
from rollout_support import load_tiny, one_thread, tiny_dir, two_adapters  # noqa: F401
from safetensors.torch import load_file
from typer.testing import CliRunner

from mimesis_rl.envs.registry import make_env, scripted_user
from mimesis_rl.models.artifact import ModelManifest, base_reference, write_manifest
from mimesis_rl.models.lora import save_adapter
from mimesis_rl.rollout import ModelAgent, SamplingParams, run_rollouts
from mimesis_rl.simulator.format import format_spec
from mimesis_rl.simulator.runtime import UserSimulator

pytestmark = pytest.mark.integration


@pytest.fixture
def project(tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:  # noqa: F811
    """A checkout-like folder: params.yaml with a small `rollout` section, two saved adapters."""
    model, _ = load_tiny(tiny_dir)
    peft = two_adapters(model)
    agent_dir = save_adapter(peft, "agent", tmp_path / "agent_adapter")
    sim_dir = tmp_path / "simulator"  # a simulator folder: adapter + manifest (turn format, decoding)
    save_adapter(peft, "simulator", sim_dir / "adapter")
    for folder in (agent_dir, sim_dir / "adapter"):  # point the adapters at the tiny base, as a trainer would
        config = json.loads((folder / "adapter_config.json").read_text())
        config["base_model_name_or_path"] = str(tiny_dir)
        (folder / "adapter_config.json").write_text(json.dumps(config))
    decoding = asdict(SamplingParams(max_new_tokens=6, do_sample=True))
    # A random tiny model never learned the <think> format: prompt it plainly so dialogues go on.
    write_manifest(sim_dir, ModelManifest(kind="lora", base=base_reference(tiny_dir), format=format_spec(),
                                          generation=decoding, extra={"card_style": "prompted"}))
    (tmp_path / "params.yaml").write_text(
        "profile: demo\nrollout:\n  agent_max_new_tokens: 6\n  user_max_new_tokens: 6\n"
        f"  default_base: {tiny_dir}\nmodels:\n  device: cpu\n  cpu_dtype: float32\nprofiles:\n  demo: {{}}\n"
    )
    monkeypatch.chdir(tmp_path)
    from mimesis_rl.cli.envs import project_parties
    from mimesis_rl.rollout import resolvers

    parties = project_parties()  # this checkout's params.yaml, a fresh pool per test
    resolvers.register(parties)
    return {"agent": agent_dir, "sim": sim_dir, "base": tiny_dir, "parties": parties}


def _register(folder: Path, name: str, alias: str) -> str:
    with mlflow.start_run():
        mlflow.log_artifacts(str(folder), artifact_path="model")
        uri = mlflow.get_artifact_uri("model")
        run_id = mlflow.active_run().info.run_id
    client = MlflowClient()
    client.create_registered_model(name)
    version = client.create_model_version(name, source=uri, run_id=run_id)
    client.set_registered_model_alias(name, alias, version.version)
    return f"models:/{name}@{alias}"


def test_folder_and_mlflow_specs_share_one_base(project):
    from mimesis_rl.envs.specs import make_agent, make_user

    uri = _register(project["sim"], "mimesis-simulator", "candidate")
    agent = make_agent(str(project["agent"]), "bargain")
    user = make_user(f"learned:{uri}", "bargain")
    prompted = make_user(f"prompted:busy_parent@{project['base']}", "bargain")
    assert isinstance(agent, ModelAgent)
    assert isinstance(user, UserSimulator) and isinstance(prompted, UserSimulator)
    assert project["parties"].pool.bases == 1  # agent, simulator adapter, prompted user: one base
    model = agent.runner.model
    assert isinstance(model, PeftModel) and len(model.peft_config) == 2
    assert user.runner.model is model and prompted.runner.model is model
    assert agent.runner.adapter != user.runner.adapter and prompted.runner.adapter is None
    # The simulator adapter downloaded from MLflow is the one that was saved, under its own name.
    saved = load_file(str(project["sim"] / "adapter" / "adapter_model.safetensors"))
    state = model.state_dict()
    name = user.runner.adapter
    for key, tensor in saved.items():
        loaded_key = key.replace(".lora_A.weight", f".lora_A.{name}.weight").replace(
            ".lora_B.weight", f".lora_B.{name}.weight"
        )
        assert torch.equal(state[loaded_key], tensor)

    env = make_env("bargain", max_turns=2)
    result = run_rollouts(
        env, agent, [user, prompted, scripted_user("bargain", "cooperative")], [0, 1, 2], progress=False
    )
    assert result.users == [
        f"learned:{uri}",
        f"prompted:busy_parent@{project['base']}",
        "scripted:cooperative",
    ]
    assert all(s.done for s in result.states)
    trl = result.to_trl()
    assert all(sum(m) > 0 for m in trl["env_mask"])


def test_bad_specs_say_what_is_wrong(project, tmp_path):
    from mimesis_rl.envs.specs import make_agent, make_user

    with pytest.raises(ValueError, match="cannot download 'models:/nope@champion'"):
        make_agent("models:/nope@champion", "bargain")
    with pytest.raises(ValueError, match="unknown persona 'pirate'"):
        make_user("prompted:pirate", "bargain")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="not a model folder"):
        make_agent(str(empty), "bargain")


def test_cli_rollout_with_model_agent_and_prompted_user(project, tmp_path):
    from mimesis_rl.cli import app

    out = tmp_path / "transcripts.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "envs",
            "rollout",
            "--env",
            "bargain",
            "--agent",
            str(project["agent"]),
            "--user",
            "prompted:assistant",
            "-n",
            "2",
            "--max-turns",
            "2",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and all(r["end_reason"] for r in records)
    assert all(t["content"] is not None for r in records for t in r["turns"])
