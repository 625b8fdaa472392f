"""The tiny-profile panel and generalisation stages in a scratch project: `sim_panel@seed1`,
`@heldout` (real SFT steps on the tiny base, registered under their own names), `@casino` skipped
with a note when CaSiNo is absent, `mimesis envs panel` telling built from missing, then
`agent_eval` with a scripted agent, a tiny model agent and a missing one against scripted, prompted
and learned unseen members in all 8 environments; the claims table from this run's numbers."""

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

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    params = load_params(REPO / "params.yaml", profile="tiny")
    params.pop("profile")
    params["sim_panel"]["members"]["casino"]["casino_dir"] = str(tmp_path / "no-casino-here")
    params["agent_eval"]["agents"] = [
        {"name": "scripted", "spec": "scripted", "trained_on": "none"},
        {"name": "tiny", "spec": "model:models/base", "trained_on": "nothing (random init)"},
        {"name": "tiny-again", "spec": "models/base"},  # the same folder: its dialogues are tiny's, reused
        {"name": "rl-mimesis", "spec": "models/agent/rl/mimesis"},  # its stage has not run here
    ]
    params["agent_eval"]["comparisons"] = {
        "scripted_vs_tiny": {"a": "scripted", "b": "tiny"},
        "mimesis_vs_assistant": {"a": "rl-mimesis", "b": "tiny"},
    }
    params["profiles"] = {"tiny": {}}
    params["profile"] = "tiny"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    data = tmp_path / "data" / "processed" / "conversations"
    data.mkdir(parents=True)
    for split in ("train", "val", "test"):
        shutil.copy(CONVERSATIONS, data / f"{split}.jsonl")
    tiny_base(tmp_path / "models" / "base")
    fidelity = tmp_path / "reports" / "sim_eval" / "fidelity.json"  # sim_eval's output, as it writes it
    fidelity.parent.mkdir(parents=True)
    fidelity.write_text(json.dumps({"results": {
        "assistant": {"turing_distance": 60.0, "turing_distance_ci": [50.0, 70.0],
                      "behaviour_fidelity": 0.5, "behaviour_fidelity_ci": [0.45, 0.55]},
        "sft+rl": {"turing_distance": 30.0, "turing_distance_ci": [20.0, 40.0],
                   "behaviour_fidelity": 0.6, "behaviour_fidelity_ci": [0.5, 0.7]}}}))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_panel_members_and_agent_eval(project: Path) -> None:
    from tasks import agent_eval, sim_panel
    from tasks._runner import main

    for member in ("seed1", "heldout"):
        metrics = sim_panel.cli(["--member", member, "--params", "params.yaml"])
        assert metrics["steps"] == 2 and metrics["registered_version"] == 1 and metrics["skipped"] == 0
        assert (project / "models" / "simulator" / "panel" / member / "mimesis.json").exists()
        version = mlflow.MlflowClient().get_model_version_by_alias(f"mimesis-simulator-{member}", "candidate")
        assert version.tags["mimesis.panel_member"] == member
    assert json.loads((project / "metrics" / "sim_panel@heldout.json").read_text())["seed"] == 1234 + 2
    skipped = sim_panel.cli(["--member", "casino", "--params", "params.yaml"])
    assert skipped["skipped"] == 1 and "CaSiNo not found" in skipped["reason"]
    assert (project / "models" / "simulator" / "panel" / "casino" / "skipped.json").exists()
    with pytest.raises(mlflow.exceptions.MlflowException):  # nothing trains the training simulator's name
        mlflow.MlflowClient().get_registered_model("mimesis-simulator")

    from mimesis_rl.cli import app

    listing = CliRunner().invoke(app, ["envs", "panel", "--no-registry"])
    assert listing.exit_code == 0, listing.output
    lines = {line.split()[1]: line for line in listing.output.splitlines() if line.split()[:1] != ["unseen:"]}
    assert " built " in lines["mimesis-simulator-seed1"] and "panel/seed1" in lines["mimesis-simulator-seed1"]
    assert " skipped " in lines["mimesis-simulator-casino"]
    assert " built " in lines["prompted-busy-parent"]
    assert "unseen: 16 of 17 built" in listing.output

    metrics = main(agent_eval.STAGE, agent_eval.run, agent_eval.inputs, argv=["--params", "params.yaml"])
    report = project / "reports" / "agent_eval"
    result = json.loads((report / "generalisation.json").read_text())
    assert result["agents"] == ["scripted", "tiny", "tiny-again"]
    assert [m["name"] for m in result["missing_agents"]] == ["rl-mimesis"]
    assert "mimesis-simulator-seed1" in result["members"] and "mimesis-simulator-heldout" in result["members"]
    assert len(result["envs"]) == 8 and result["seeds"] == [10000, 10001]
    assert len(result["cells"]) == 3 * len(result["members"]) * 8
    assert all(c["n"] == 2 for c in result["cells"])
    rows = json.loads((report / "rows.json").read_text())
    keys = {a: [(r["member"], r["env"], r["seed"]) for r in rows if r["agent"] == a]
            for a in result["agents"]}
    assert keys["scripted"] == keys["tiny"]  # paired: the same dialogues for every agent
    assert [{**r, "agent": "tiny"} for r in rows if r["agent"] == "tiny-again"] == [
        r for r in rows if r["agent"] == "tiny"]
    assert result["cost"]["per_agent"]["tiny-again"] == {"seconds": 0.0, "dialogues": len(keys["tiny"]),
                                                         "same_as": "tiny"}
    assert "**tiny-again** has the same folder fingerprint as **tiny**" in (
        report / "generalisation.md").read_text()
    assert (report / "transcripts" / "tiny-again.jsonl").exists()
    assert all(r["agent_turns"] <= 2 for r in rows)
    comp = result["comparisons"]["scripted_vs_tiny"]
    assert comp["measured"] and comp["of"] == len(result["members"]) and len(comp["per_member"]) == comp["of"]
    assert result["comparisons"]["mimesis_vs_assistant"]["measured"] is False
    for agent in ("scripted", "tiny"):
        assert (report / f"heatmap_{agent}.png").stat().st_size > 2000
        assert (report / "transcripts" / f"{agent}.jsonl").exists()
    behaviour = result["per_agent"]["scripted"]["behaviour"]
    assert behaviour["dialogues_with_private"] > 0 and behaviour["clarifying_questions"] is not None
    assert "better on" in (report / "generalisation.md").read_text()

    claims = json.loads((report / "claims.json").read_text())["rows"]
    assert [r["verdict"] for r in claims] == ["within noise", "not measured", "not measured"]
    assert "turing_distance: sft+rl 30.000 [20.000, 40.000]" in claims[0]["numbers"]
    assert "**within noise**" in (report / "claims.md").read_text()

    saved = json.loads((project / "metrics" / "agent_eval.json").read_text())
    assert saved == json.loads(json.dumps(metrics)) and saved["missing_agents"] == 1
    assert result["cost"]["cpu_seconds_per_dialogue"] > 0
    assert result["member_kinds"]["mimesis-simulator-seed1"] == "learned"
    assert saved["dialogues"] == len(rows) == 3 * len(result["members"]) * 8 * 2
    client = mlflow.MlflowClient()
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              "tags.`mimesis.stage` = 'agent_eval'")
    artifacts = {a.path for a in client.list_artifacts(runs[0].info.run_id, "agent_eval")}
    assert {"agent_eval/generalisation.json", "agent_eval/claims.md"} <= artifacts
