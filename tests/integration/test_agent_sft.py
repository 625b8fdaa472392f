"""agent_sft on the tiny model, real TRL: loss on agent turns only, an agent folder, a per-domain report."""

from __future__ import annotations

import pytest
from rollout_support import one_thread, same_adapter, tiny_dir  # noqa: F401

from mimesis_rl.agent.artifact import LONGEST_TURN, turn_budget_problem
from mimesis_rl.agent.data import clone_examples
from mimesis_rl.agent.sft import AgentSFTSettings, train_agent_sft
from mimesis_rl.models.artifact import read_manifest
from mimesis_rl.models.loading import load_tokenizer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_assistant_mask_covers_exactly_the_agent_turns(tiny_dir):  # noqa: F811
    tok = load_tokenizer(tiny_dir)
    examples, _ = clone_examples(["bargain"], ["scripted:cooperative"], per_domain=1)
    messages = examples[0]["messages"]
    out = tok.apply_chat_template(messages, tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    trained = tok.decode([i for i, m in zip(ids, mask, strict=True) if m], skip_special_tokens=True)
    agent_text = "".join(m["content"] for m in messages if m["role"] == "assistant")
    assert trained.replace(" ", "") == agent_text.replace(" ", "")
    user_text = messages[1]["content"]
    assert user_text.replace(" ", "") not in trained.replace(" ", "")


def test_agent_sft_trains_saves_and_reports(tiny_dir, tmp_path):  # noqa: F811
    settings = AgentSFTSettings.from_section({
        "domains": ["bargain"], "users": ["scripted:cooperative"], "per_domain": 2, "max_turns": 2,
        "max_length": 1024, "base_model": str(tiny_dir), "max_steps": 2, "batch_size": 2,
        "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"},
        "eval_seeds": 1, "eval_users": ["scripted:cooperative", "prompted:assistant"],
        "generation": {"max_new_tokens": 8, "do_sample": False}, "output_dir": str(tmp_path / "sft"),
        "checkpoint_dir": str(tmp_path / "ck"), "device": "cpu", "bf16": False})
    metrics = train_agent_sft(settings)
    assert metrics["steps"] == 2 and metrics["examples"] == 2
    assert metrics["train_loss"] > 0
    for user in ("scripted:cooperative", "prompted:assistant"):
        row = metrics["eval"][user]["bargain"]
        assert row["n"] == 1 and 0.0 <= row["valid_action_rate"] <= 1.0
        assert set(metrics["eval"][user]["mean"]) >= {"success_rate", "valid_action_rate"}
    manifest = read_manifest(tmp_path / "sft")
    assert manifest.role == "agent" and manifest.kind == "lora"
    assert (tmp_path / "sft" / "adapter" / "adapter_config.json").exists()
    assert "action_spans.asked" not in metrics  # weight 1: TRL's own collator and loss
    # the longest agent turn it learned travels with the folder: a budget below it is named, not silent
    longest = metrics[LONGEST_TURN]
    assert longest > 8 and manifest.extra[LONGEST_TURN] == longest
    problem = turn_budget_problem(tmp_path / "sft", longest - 1)
    assert problem and f"agent_max_new_tokens={longest - 1}" in problem and f"{longest} tokens" in problem
    assert turn_budget_problem(tmp_path / "sft", longest) is None
    assert turn_budget_problem(tmp_path / "nowhere", 1) is None  # nothing recorded: nothing to say


def test_agent_sft_weighs_every_final_action(tiny_dir, tmp_path):  # noqa: F811
    settings = AgentSFTSettings.from_section({
        "domains": ["bargain", "campsite"], "users": ["scripted:cooperative"],
        "per_domain": {"campsite": 3, "bargain": 1}, "action_weight": 16.0, "max_turns": 4,
        "max_length": 1536, "base_model": str(tiny_dir), "max_steps": 2, "batch_size": 2,
        "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"},
        "eval_seeds": 0, "generation": {"max_new_tokens": 8, "do_sample": False},
        "output_dir": str(tmp_path / "sft"), "checkpoint_dir": str(tmp_path / "ck"), "device": "cpu",
        "bf16": False})
    metrics = train_agent_sft(settings)
    assert metrics["examples"] == 4 and metrics["steps"] == 2
    # every batch row's final action was found among its trained tokens and weighed
    assert metrics["action_spans.asked"] == 4 and metrics["action_spans.found"] == 4


def test_agent_sft_resumes_from_its_last_checkpoint(tiny_dir, tmp_path):  # noqa: F811
    section = {
        "domains": ["bargain"], "users": ["scripted:cooperative"], "per_domain": 2, "max_turns": 2,
        "max_length": 1024, "base_model": str(tiny_dir), "max_steps": 2, "batch_size": 1,
        "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"},
        "eval_seeds": 1, "generation": {"max_new_tokens": 4, "do_sample": False},
        "output_dir": str(tmp_path / "sft"), "checkpoint_dir": str(tmp_path / "ck"),
        "save_steps": 1, "keep_checkpoints": True, "device": "cpu", "bf16": False}
    first = train_agent_sft(AgentSFTSettings.from_section(section))
    assert first["resumed_from_step"] == 0 and first["steps"] == 2
    (run_dir,) = (tmp_path / "ck").iterdir()  # one folder per settings + seed
    assert (run_dir / "checkpoint-2" / "adapter_model.safetensors").exists()
    again = train_agent_sft(AgentSFTSettings.from_section(section))
    assert again["resumed_from_step"] == 2 and again["steps"] == 2  # nothing left to train
    same_adapter(run_dir / "checkpoint-2", tmp_path / "sft" / "adapter")  # the weights came back too
    other = train_agent_sft(AgentSFTSettings.from_section({**section, "keep_checkpoints": False,
                                                            "learning_rate": 1e-4}))
    assert other["resumed_from_step"] == 0  # other settings: not this run's checkpoint
    assert len(list((tmp_path / "ck").iterdir())) == 1  # and its own checkpoints are dropped when done
