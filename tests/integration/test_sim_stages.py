"""The tiny-profile simulator stages end to end in a scratch project: sim_sft -> sim_rl -> sim_eval,
each through the stage runner (MLflow stage runs, metrics files), then `mimesis sim eval` on a
JSONL none of them has seen. Also pins the GRPO run: every reward is computed and logged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest
import yaml
from sim_support import CONVERSATIONS, REPO, tiny_base
from typer.testing import CliRunner

from mimesis_rl.config import load_params
from mimesis_rl.simulator.rewards import REWARD_NAMES

pytestmark = [pytest.mark.integration, pytest.mark.slow]
HELDOUT = REPO / "tests" / "fixtures" / "sim" / "heldout.jsonl"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """params.yaml (tiny profile, resolved) + conversations + tiny base, in a scratch folder."""
    params = load_params(REPO / "params.yaml", profile="tiny")
    params.pop("profile")
    params["sim_rl"]["labeler"] = "rules"
    params["sim_rl"]["curve"] = {"enabled": True, "fractions": [0, 0.5, 1], "env_dialogues": 1,
                                 "decision_prompts": 2, "select": ["env_success_rate", "decision_accuracy"]}
    params["sim_sft"]["curve"] = {"enabled": True, "fractions": [0, 1], "env_dialogues": 0,
                                  "decision_prompts": 2}
    params["sim_sft"]["decide_by_reasoning"] = True  # recorded in the folders; sim_rl's reward follows it
    params["sim_eval"]["fidelity"]["max_turns"] = 24
    params["sim_eval"]["decision_items"] = 2
    params["profiles"] = {"tiny": {}}
    params["profile"] = "tiny"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    data = tmp_path / "data" / "processed" / "conversations"
    data.mkdir(parents=True)
    for split in ("train", "val", "test"):
        shutil.copy(CONVERSATIONS, data / f"{split}.jsonl")
    tiny_base(tmp_path / "models" / "base")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _stage(name: str) -> dict:
    import importlib

    from tasks._runner import main

    module = importlib.import_module(f"tasks.{name}")
    return main(module.STAGE, module.run, module.inputs, argv=["--params", "params.yaml"])


def test_tiny_simulator_stages_and_cli(project: Path) -> None:
    sft = _stage("sim_sft")
    assert sft["steps"] == 4 and sft["registered_version"] == 1
    # the SFT's learning curve: the same held-out items before the first step and after the last
    assert [p["step"] for p in sft["curve"]] == [0, 4]
    assert all(0.0 <= p["decision_accuracy"] <= 1.0 for p in sft["curve"])
    rl = _stage("sim_rl")
    assert rl["steps"] == 2 and rl["registered_version"] == 2
    assert rl["prompt_domains"] >= 4  # corpus domains + environment goal cards
    assert rl["prompts_env"] > 0
    assert rl["prompts_decision"] > 0 and rl["prompts_question"] > 0  # states where the card decides
    for name in REWARD_NAMES:
        assert f"reward.{name}.steps" in rl, name  # built and handed to GRPO
        if name not in ("decision", "answers"):  # they judge only their own prompts (2 of 33 on tiny)
            assert f"reward.{name}.first" in rl, name
    assert (project / "models" / "simulator" / "rl" / "discriminator.npz").exists()
    # both folders say their decisions are read from their reasoning, and a loaded simulator does so
    from mimesis_rl.models.artifact import read_manifest
    from mimesis_rl.simulator.runtime import UserSimulator

    for folder in ("sft", "rl"):
        assert read_manifest(project / "models" / "simulator" / folder).extra["decide_by_reasoning"] is True
    assert UserSimulator.load(project / "models" / "simulator" / "rl", device="cpu").decide_by_reasoning
    # the learning curve: the trained model at 0, 1/2 and all of its 2 steps, the same keys at each
    curve = json.loads((project / "metrics" / "sim_rl.json").read_text())["curve"]
    assert [p["step"] for p in curve] == [0, 1, 2]
    for point in curve:
        for key in ("decision_accuracy", "answers_accuracy", "env_success_rate"):
            assert 0.0 <= point[key] <= 1.0, key
    # the adapter saved is the best point's (ties: the later step)
    best = max(curve, key=lambda p: (p["env_success_rate"], p["decision_accuracy"], p["step"]))
    assert rl["curve_selected_step"] == best["step"]

    evaluation = _stage("sim_eval")
    for key in ("assistant", "sft-only", "sft_rl"):
        row = evaluation[key]
        assert 0.0 <= row["fidelity_index"] <= 100.0
        assert 0.0 <= row["behaviour_fidelity"] <= 1.0
        assert row["turns"] > 0
    report = (project / "reports" / "sim_eval" / "fidelity.md").read_text()
    assert "| assistant |" in report and "| sft+rl |" in report and "| sft-only |" in report
    assert (project / "reports" / "sim_eval" / "fidelity.png").stat().st_size > 1000
    assert json.loads((project / "metrics" / "sim_eval.json").read_text())["sft_rl"]["turns"] > 0
    # claim 1's decision accuracy beside the Turing distance: every row replied to the same items
    fidelity = json.loads((project / "reports" / "sim_eval" / "fidelity.json").read_text())["results"]
    for name in ("assistant", "sft+rl"):
        decided = fidelity[name]["decisions"]
        assert decided["decisions"] > 0 and decided["questions"] > 0, name
        assert 0.0 <= decided["decision_accuracy"] <= 1.0
    assert 0.0 <= evaluation["sft_rl"]["decision_accuracy"] <= 1.0

    client = mlflow.MlflowClient()
    candidate = client.get_model_version_by_alias("mimesis-simulator", "candidate")
    assert candidate.tags["mimesis.stage"] == "sim_rl"
    run = client.get_run(candidate.run_id)
    assert [m.step for m in client.get_metric_history(run.info.run_id, "curve.env_success_rate")] == [0, 1, 2]
    assert candidate.tags["mimesis.data_version"].startswith("md5:")
    assert client.get_model_version_by_alias("mimesis-simulator", "sft").tags["mimesis.stage"] == "sim_sft"
    runs = {r.data.tags["mimesis.stage"]: r for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()])}
    artifacts = [a.path for a in client.list_artifacts(runs["sim_eval"].info.run_id, "sim_eval")]
    assert "sim_eval/fidelity_table.json" in artifacts
    assert client.get_metric_history(runs["sim_sft"].info.run_id, "sft.loss")

    # `mimesis sim eval` on a file none of the stages saw (one malformed line in it), vs the baseline.
    from mimesis_rl.cli import app

    result = CliRunner().invoke(app, ["sim", "eval", "--model", "models:/mimesis-simulator@candidate",
                                      "--data", str(HELDOUT), "--baseline", "assistant", "--max-turns", "0",
                                      "--labeler", "rules", "--embedding", "hashing", "--device", "cpu",
                                      "--max-bad-share", "0.2",  # 1 of 6 lines is bad (default: 5%)
                                      "--out", str(project / "reports" / "cli")])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output[result.output.index("{"):])
    assert printed["bad_records"] == 1
    assert set(printed["simulators"]) == {"assistant", "model"}
    assert printed["simulators"]["model"]["turns"] == 15  # every user turn of the 5 valid conversations


def test_grpo_prompts_are_the_runtimes_prompts(tmp_path: Path) -> None:
    """GRPO trains the turns inference samples: each text prompt, tokenized the way TRL tokenizes it,
    is exactly `UserSimulator.prompt_ids` of the same messages (chat template + forced `<think>`)."""
    from mimesis_rl.data.jsonl import read_conversations
    from mimesis_rl.models.inference import SamplingParams
    from mimesis_rl.models.inference.runner import ModelRunner
    from mimesis_rl.models.loading import load_base
    from mimesis_rl.simulator.format import THINK_OPEN
    from mimesis_rl.simulator.rl import render_prompts
    from mimesis_rl.simulator.rl_data import build_prompts
    from mimesis_rl.simulator.runtime import UserSimulator

    base = tiny_base(tmp_path / "base")
    model, tokenizer = load_base(base, device="cpu", padding_side="left")
    sim = UserSimulator(ModelRunner(model, tokenizer, SamplingParams(max_new_tokens=24)))
    rows = build_prompts(read_conversations(CONVERSATIONS), 4, 2, ["shopping", "bargain"], env_turns="all")
    render_prompts(rows, tokenizer, limit=sim.max_context_tokens - 24)  # as sim_rl: positions - completion
    assert any(r["source"] == "env" and r["user_turn_number"] > 0 for r in rows)
    for row in rows:
        assert row["prompt"].endswith(THINK_OPEN)
        assert tokenizer(text=[row["prompt"]])["input_ids"][0] == sim.prompt_ids(row["messages"])
        assert json.loads(row["context"]) == row["messages"]


def test_sim_eval_stage_reports_format_openings_and_environment(project: Path) -> None:
    """`sim_eval` alone on the assistant baseline (no training needed): the format and opening rows,
    and the environment part (tiny profile: every domain, one short dialogue) in the report,
    the metrics file and MLflow."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["sim_eval"]["simulators"] = [{"name": "assistant", "spec": "assistant"}]
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    metrics = _stage("sim_eval")
    row = metrics["assistant"]
    for key in ("clean_share", "repaired_share", "closed_at_budget_share", "rejected_after_resample_share",
                "role_break_share",
                "sim_leave_rate", "real_leave_rate", "opening_turns", "opening_cue_echoes"):
        assert key in row, key
    assert row["clean_share"] + row["repaired_share"] + row["rejected_sample_share"] == pytest.approx(1.0)
    env = metrics["environment"]
    assert set(env) == {"reference", "assistant"}
    assert env["reference"]["success_rate"] > 0 and env["reference"]["dialogues"] == 8  # 2 turns: not all
    assert {f"{d}.success_rate" for d in ("shopping", "tutoring")} <= set(env["assistant"])
    report = (project / "reports" / "sim_eval" / "fidelity.md").read_text()
    for title in ("## Turn format and user role", "## Opening turns", "## As an environment"):
        assert title in report
    assert report.count("| assistant | ") >= 3 + 8  # three simulator tables, eight domain rows
    assert (project / "reports" / "sim_eval" / "environment.png").stat().st_size > 5000
    transcripts = (project / "reports" / "sim_eval" / "environment_transcripts.jsonl").read_text()
    assert len(transcripts.splitlines()) == 16  # 8 domains x 1 dialogue x (reference + assistant)

    client = mlflow.MlflowClient()
    run = next(r for r in client.search_runs([e.experiment_id for e in client.search_experiments()])
               if r.data.tags.get("mimesis.stage") == "sim_eval")
    assert "env.assistant.success_rate" in run.data.metrics
    assert "env.reference.shopping.success_rate" in run.data.metrics
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id, "sim_eval")]
    assert "sim_eval/environment_table.json" in artifacts and "sim_eval/environment.png" in artifacts
