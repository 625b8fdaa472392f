"""The training skeleton's settings: every trainer fills its TRL config by pass-through from params.yaml
(top-level TRL keys and `trainer:` alike), refuses the fields it sets itself naming the key, and
survives the `accelerate launch` round trip; the checkpoint key counts the global batch."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from mimesis_rl.agent.rl_settings import AgentRLSettings
from mimesis_rl.agent.sft import AgentSFTSettings
from mimesis_rl.params.check import check_raw
from mimesis_rl.simulator.rl import RLSettings
from mimesis_rl.simulator.sft import SFTSettings
from mimesis_rl.training.checkpoints import run_identity
from mimesis_rl.training.config import trainer_config

REPO = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((REPO / "params.yaml").read_text())


def test_agent_sections_pass_trl_fields_through_as_the_simulator_sections_do() -> None:
    s = AgentSFTSettings.from_section({"max_steps": 3, "batch_size": 2, "max_length": 512,
                                       "trainer": {"optim": "adamw_torch"}})
    assert s.option("max_steps") == 3 and s.option("per_device_train_batch_size") == 2
    assert s.option("max_length") == 512 and s.option("optim") == "adamw_torch"
    assert s.option("lr_scheduler_type") == "cosine"  # the stage's default stays
    assert AgentSFTSettings.from_section(s.to_json()) == s  # the accelerate worker's round trip
    r = AgentRLSettings.from_section({"temperature": 0.7, "batch_size": 4, "num_generations": 2})
    assert r.option("temperature") == 0.7 and r.option("batch_size") == 4
    assert r.option("max_completion_length") == 4096
    assert AgentRLSettings.from_section(r.to_json()) == r
    assert r.with_options(batch_size=6, num_generations=3).option("per_device_train_batch_size") == 6


@pytest.mark.parametrize(("cls", "section", "key"), [
    (AgentSFTSettings, {"packing": True}, "packing"),
    (AgentSFTSettings, {"trainer": {"assistant_only_loss": False}}, "assistant_only_loss"),
    (AgentRLSettings, {"save_strategy": "no"}, "save_strategy"),
    (AgentRLSettings, {"trainer": {"use_vllm": True}}, "use_vllm"),
    (SFTSettings, {"trainer": {"eval_strategy": "no"}}, "eval_strategy"),
    (RLSettings, {"trainer": {"reward_weights": [1.0]}}, "reward_weights"),
])
def test_fields_the_stage_sets_are_refused_naming_the_key(cls: type, section: dict, key: str) -> None:
    with pytest.raises(ValueError, match=rf"set by the stage itself.*{key}|{key}.*set by the stage itself"):
        cls.from_section(section)


def test_unknown_trl_fields_and_keys_are_refused() -> None:
    trl_field = r"params.yaml: agent_sft.trainer.no_such: unknown key \(not a TRL SFTConfig field\)"
    with pytest.raises(ValueError, match=trl_field):
        AgentSFTSettings.from_section({"trainer": {"no_such": 1}})
    with pytest.raises(ValueError, match=r"params.yaml: agent_rl.nope: unknown key"):
        AgentRLSettings.from_section({"nope": 1})
    with pytest.raises(ValueError, match=r"belong in the `vllm:` block"):
        AgentRLSettings.from_section({"trainer": {"vllm_mode": "colocate"}})


def test_the_config_holds_what_the_stage_owns(tmp_path: Path) -> None:
    s = AgentSFTSettings.from_section({"max_steps": 2, "device": "cpu", "bf16": False})
    config = trainer_config(s, tmp_path, 7, "agent_sft", assistant_only_loss=True, packing=False,
                            save_strategy="steps")
    assert config.max_steps == 2 and config.seed == config.data_seed == 7 and config.use_cpu
    assert config.assistant_only_loss and not config.packing and config.output_dir == str(tmp_path)


def test_the_checkpoint_key_is_the_global_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    one = AgentRLSettings.from_section({"batch_size": 4, "num_generations": 2})
    two = AgentRLSettings.from_section({"batch_size": 2, "num_generations": 2, "launcher": "accelerate",
                                        "accelerate_config": "x.yaml"})
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert run_identity(two.to_json()) == run_identity({**one.to_json(), "trainer": {
        **one.trainer, "per_device_train_batch_size": 2}})
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert run_identity(one.to_json()) != run_identity(two.to_json())


def test_the_schema_takes_trl_fields_in_agent_sections_and_names_a_typo() -> None:
    raw = copy.deepcopy(RAW)
    raw["agent_sft"].update(weight_decay=0.01, trainer={"optim": "adamw_torch"}, launcher="accelerate")
    raw["agent_rl"].update(max_completion_length=2048, deepspeed=None)
    raw["agent_rl"]["variants"]["mimesis"]["learning_rate"] = 2.0e-4
    assert check_raw(raw, "p.yaml") == []
    raw["agent_sft"]["learnig_rate"] = 1e-3
    problems = check_raw(raw, "p.yaml")
    assert any("agent_sft.learnig_rate: unknown key (not a agent_sft key nor a TRL SFTConfig field)" in p
               for p in problems), problems
