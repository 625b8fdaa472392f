"""The evidence point's claims, done-when checks and curves, from small written stage outputs
(tests/fixtures/evidence: a sim_eval fidelity.json with its environment part, agent_eval's
generalisation.json and rows.json, metrics files with curve points)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from mimesis_rl.eval.claims import FAILS, HOLDS, MISSING, NOISE
from mimesis_rl.eval.evidence import (
    FAIL,
    PASS,
    card_check,
    collect,
    environment_check,
    read_curves,
    sft_check,
    turing_check,
)
from mimesis_rl.eval.evidence_report import markdown
from mimesis_rl.eval.evidence_settings import EvidenceSettings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evidence"


def settings_at(root: Path, **extra: Any) -> EvidenceSettings:
    reports = root / "reports"
    return EvidenceSettings(output_dir=str(reports / "evidence"), sim_eval=str(reports / "sim_eval"),
                            agent_eval=str(reports / "agent_eval"), metrics=str(root / "metrics"), **extra)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A copy of the finished run's files, free to edit."""
    shutil.copytree(FIXTURES, tmp_path / "run")
    return tmp_path / "run"


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def save(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj))


def by_id(items: list[dict[str, Any]], key: Any) -> dict[str, Any]:
    return next(i for i in items if i["id"] == key)


def test_the_fixture_run_gives_each_claim_and_check_its_verdict(run: Path) -> None:
    evidence = collect(settings_at(run))
    claims = {r["id"]: r for r in evidence["claims"]}
    # claim 1: Turing distance 40 [34, 46] vs 80 [74, 86] and behaviour fidelity apart the right way
    assert claims[1]["verdict"] == HOLDS
    assert claims[1]["n"] == {"turns": 128, "conversations": 36}
    assert claims[1]["decisions"]["sft+rl"]["decision_accuracy"] == 0.625
    assert claims[1]["decisions"]["assistant"]["decision_accuracy"] == 0.25
    # claim 2: paired interval [0.25, 0.75] above 0; claim 3: each member's interval contains 0
    assert claims[2]["verdict"] == HOLDS
    assert claims[2]["n"] == {"members": 2, "seeds": 4, "domains": 2, "pairs": 16}
    assert claims[3]["verdict"] == NOISE
    checks = {c["id"]: c for c in evidence["checks"]}
    assert checks["environment"]["status"] == PASS and checks["environment"]["numbers"]["met"] == 6
    assert checks["turing_distance"]["status"] == PASS
    # agent_sft never succeeds, rl-mimesis always: the paired interval over rows.json is [1, 1]
    assert checks["agent_vs_sft"]["status"] == PASS
    assert checks["agent_vs_sft"]["numbers"]["diff"] == 1.0
    assert checks["agent_vs_sft"]["numbers"]["pairs"] == 16
    assert "rows.json" in checks["agent_vs_sft"]["numbers"]["source"]
    # 2 members x 4 seeds is below the 9 x 32: the size check fails, whatever the verdicts
    assert checks["claims_size"]["status"] == FAIL
    assert checks["claims_size"]["measured"] == "2 members x 2 domains x 4 seeds"


@pytest.mark.parametrize(("cand_ci", "verdict", "status"), [
    ([34.0, 46.0], HOLDS, PASS),        # below the assistant's [74, 86], apart
    ([60.0, 76.0], NOISE, FAIL),        # overlaps it: within noise, so the check is not met
    ([90.0, 99.0], FAILS, FAIL),        # above it, apart: the claim does not hold
])
def test_turing_distance_verdict_comes_from_the_intervals(run: Path, cand_ci: list[float], verdict: str,
                                                          status: str) -> None:
    path = run / "reports/sim_eval/fidelity.json"
    fidelity = load(path)
    row = fidelity["results"]["sft+rl"]
    row["turing_distance"], row["turing_distance_ci"] = sum(cand_ci) / 2, cand_ci
    row["behaviour_fidelity_ci"] = [0.8, 0.8]  # keep the other part of claim 1 holding
    save(path, fidelity)
    evidence = collect(settings_at(run))
    check = by_id(evidence["checks"], "turing_distance")
    assert (check["numbers"]["verdict"], check["status"]) == (verdict, status)
    # the claim keeps whatever verdict the numbers give (one part holds, the other as above)
    assert by_id(evidence["claims"], 1)["verdict"] == verdict


@pytest.mark.parametrize(("ci", "verdict"),
                         [([0.1, 0.3], HOLDS), ([-0.1, 0.3], NOISE), ([-0.3, -0.1], FAILS)])
def test_agent_claim_verdict_comes_from_the_paired_interval(run: Path, ci: list[float], verdict: str) -> None:
    path = run / "reports/agent_eval/generalisation.json"
    g = load(path)
    g["comparisons"]["mimesis_vs_assistant"]["overall"].update({"diff": sum(ci) / 2, "ci": ci})
    save(path, g)
    assert by_id(collect(settings_at(run))["claims"], 2)["verdict"] == verdict


def test_missing_inputs_say_not_measured_and_never_crash(tmp_path: Path) -> None:
    s = settings_at(tmp_path / "nothing")
    evidence = collect(s)
    assert [r["verdict"] for r in evidence["claims"]] == [MISSING] * 3
    assert [c["status"] for c in evidence["checks"]] == [MISSING] * 5
    assert evidence["curves"] == {"simulator": {}, "agents": {}}
    assert not any(evidence["inputs"].values())
    text = markdown({**evidence, "charts": {}})
    assert "not measured" in text and "no metrics file holds a `curve`" in text


def test_partial_inputs_leave_only_their_rows_unmeasured(run: Path) -> None:
    (run / "reports/agent_eval/generalisation.json").unlink()
    fidelity = load(run / "reports/sim_eval/fidelity.json")
    fidelity["environment"] = None
    save(run / "reports/sim_eval/fidelity.json", fidelity)
    evidence = collect(settings_at(run))
    assert [r["verdict"] for r in evidence["claims"]] == [HOLDS, MISSING, MISSING]
    checks = {c["id"]: c["status"] for c in evidence["checks"]}
    assert checks == {"environment": MISSING, "card_decisions": MISSING, "turing_distance": PASS,
                      "agent_vs_sft": MISSING, "claims_size": MISSING}


def _env(reference: dict[str, float], candidate: dict[str, float]) -> dict[str, Any]:
    rows = {"reference": {d: {"success_rate": v} for d, v in reference.items()},
            "sft_rl": {d: {"success_rate": v} for d, v in candidate.items()}}  # the metrics' key works too
    return {"environment": {"rows": rows}}


def test_environment_check_arithmetic() -> None:
    s = EvidenceSettings()
    domains = [f"d{i}" for i in range(8)]
    ref = dict.fromkeys(domains, 0.8)
    # exactly half counts; just under does not: 6 at 0.4, 2 at 0.39 -> 6 of 8, pass
    cand = {d: (0.4 if i < 6 else 0.39) for i, d in enumerate(domains)}
    check = environment_check(s, _env(ref, cand))
    assert (check["status"], check["numbers"]["met"], check["numbers"]["of"]) == (PASS, 6, 8)
    cand["d5"] = 0.39
    check = environment_check(s, _env(ref, cand))
    assert (check["status"], check["numbers"]["met"]) == (FAIL, 5)
    # a domain the cooperative user never wins is not comparable: it does not count as met
    ref["d0"], cand["d0"] = 0.0, 0.0
    check = environment_check(s, _env(ref, cand))
    assert check["numbers"]["met"] == 4 and "not comparable: d0" in check["measured"]
    # a domain with no candidate row counts as not met
    del cand["d1"]
    assert environment_check(s, _env(ref, cand))["numbers"]["met"] == 3
    # the threshold is a setting
    assert environment_check(EvidenceSettings(env_domains=3), _env(ref, cand))["status"] == PASS
    # the decisions the candidate met in those dialogues are said beside it (sim_eval's `card_*` keys)
    env = _env(ref, cand)
    env["environment"]["overall"] = {"sft+rl": {"card_decisions": 20, "card_agreement": 0.45,
                                                "card_yes_rate": 0.1, "card_neither_rate": 0.85}}
    check = environment_check(s, env)
    assert "20 proposals" in check["measured"] and "said yes 10%, neither yes nor no 85%" in check["measured"]
    assert check["numbers"]["decisions"]["card_agreement"] == 0.45


def test_card_check_fails_an_always_yes_user_and_passes_one_that_decides_by_its_card() -> None:
    """The environment check's success pays a user who accepts every proposal (the scripted agents
    mostly propose what the card takes); the card check reads the yes-rate on both sides of the card."""
    s = EvidenceSettings()

    def env(by_domain: dict[str, dict[str, int]]) -> dict[str, Any]:
        return {"environment": {"decisions": {"sft_rl": {"by_domain": by_domain}}}}

    always_yes = env({"bargain": {"card_accepts:accepted": 20, "card_declines:accepted": 8},
                      "campsite": {"card_accepts:accepted": 10, "card_declines:accepted": 4}})
    check = card_check(s, always_yes)
    assert check["status"] == FAIL and check["numbers"]["diff"] == 0.0
    assert check["numbers"]["yes_where_accepts"] == [30, 30]
    assert check["numbers"]["yes_where_declines"] == [12, 12]
    follows = env({"bargain": {"card_accepts:accepted": 18, "card_accepts:neither": 2,
                               "card_declines:declined": 9, "card_declines:accepted": 1}})
    check = card_check(s, follows)
    assert check["status"] == PASS and check["numbers"]["diff"] == pytest.approx(0.9 - 0.1)
    assert check["numbers"]["ci"][0] > 0 and "18/20" in check["measured"] and "1/10" in check["measured"]
    # a simulator that never met a proposal its card declines cannot show it tells the two apart
    one_side = env({"bargain": {"card_accepts:accepted": 18, "card_accepts:neither": 2}})
    assert card_check(s, one_side)["status"] == MISSING
    assert card_check(s, None)["status"] == MISSING


def test_card_check_reads_within_domains_so_a_user_that_decides_by_domain_fails() -> None:
    """Yes to everything in bargain, no to everything in travel: pooled, +0.70 with an interval above 0,
    because bargain met most of the proposals its card accepts and travel most of those it declines."""
    by_domain = {"bargain": {"card_accepts:accepted": 20, "card_declines:accepted": 4},
                 "travel": {"card_accepts:declined": 4, "card_declines:declined": 20},
                 "content": {"card_accepts:accepted": 6}}  # one side only: carries no weight
    env = {"environment": {"decisions": {"sft+rl": {"by_domain": by_domain}}}}
    check = card_check(EvidenceSettings(), env)
    numbers = check["numbers"]
    assert check["status"] == FAIL and numbers["diff"] == 0.0
    assert numbers["yes_where_accepts"] == [26, 30] and numbers["yes_where_declines"] == [4, 24]
    assert "(pooled +0.70)" in check["measured"]
    assert "within domains (bargain, travel) +0.00" in check["measured"]
    assert check["numbers"]["domains_one_sided"] == ["content"]


def test_turing_check_needs_intervals() -> None:
    fidelity = {"results": {"sft+rl": {"turing_distance": 40.0}, "assistant": {"turing_distance": 80.0,
                                                                             "turing_distance_ci": [70, 90]}}}
    assert turing_check(EvidenceSettings(), fidelity)["status"] == MISSING


def test_sft_check_prefers_agent_evals_comparison_and_needs_the_warm_start(run: Path) -> None:
    s = EvidenceSettings()
    g = load(run / "reports/agent_eval/generalisation.json")
    rows = load(run / "reports/agent_eval/rows.json")
    # a configured comparison (a = rl-mimesis, b = agent_sft) is read as it is: within noise -> fail
    g["comparisons"]["mimesis_vs_sft"] = {
        "a": "rl-mimesis", "b": "agent_sft", "metric": "success", "measured": True, "of": 2,
        "overall": {"diff": 0.1, "ci": [-0.05, 0.25], "pairs": 16, "verdict": NOISE}}
    check = sft_check(s, g, rows)
    assert (check["status"], check["numbers"]["source"]) == (FAIL, "agent_eval's comparison")
    # the warm start not evaluated: not measured, whatever the other agents did
    g["agents"] = [a for a in g["agents"] if a != "agent_sft"]
    check = sft_check(s, g, rows)
    assert check["status"] == MISSING and "agent_sft not among" in check["measured"]
    assert sft_check(s, None, None)["status"] == MISSING


def test_curves_are_read_per_stage_in_step_order(run: Path) -> None:
    curves = read_curves(run / "metrics")
    assert sorted(curves) == ["agent_rl@assistant", "agent_rl@mimesis", "sim_rl"]  # agent_eval has none
    assert [p["step"] for p in curves["sim_rl"]] == [0, 2, 4, 8]
    assert curves["agent_rl@mimesis"][-1]["success_rate"] == pytest.approx(0.35)


def test_stage_writes_claims_md_json_and_linked_pngs(run: Path) -> None:
    from tasks.evidence import build

    s = settings_at(run)
    evidence, files = build(s, {"profile": "evidence", "git_commit": "0123456789abcdef"})
    out = Path(s.output_dir)
    names = {"claims.md", "evidence.json", "simulator_curves.png", "agent_curves.png"}
    assert {f.name for f in files} == names
    for png in ("simulator_curves.png", "agent_curves.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (out / "claims.md").read_text()
    assert "](simulator_curves.png)" in text and "](agent_curves.png)" in text
    assert "profile **evidence**" in text and "`0123456789`" in text
    assert text.count("**holds**") == 2 and "**within noise**" in text
    assert "| 6 of 8 domains" in text or "6 of 8 domains" in text
    assert "`sft+rl` 0.625 of 24 decisions" in text
    written = load(out / "evidence.json")
    assert written["charts"] == {"simulator": "simulator_curves.png", "agents": "agent_curves.png"}
    assert [c["status"] for c in written["checks"]] == [PASS, FAIL, PASS, PASS, FAIL]
    assert written == json.loads(json.dumps(evidence))


def test_benchmark_payload_from_a_finished_run(run: Path) -> None:
    from benchmarks.evidence import payload
    from tasks.evidence import build

    s = settings_at(run)
    build(s, {"profile": "evidence", "git_commit": "abc"})
    body = payload(s, {"profile": "evidence"}, uri=None)
    assert body["profile"] == "evidence" and body["git_commit"] == "abc"
    assert body["charts"]["agents"].endswith("agent_curves.png")
    # without an MLflow store, stage seconds come from the metrics files that record them
    assert body["stages"] == {"agent_eval": {"seconds": 300.5, "source": "metrics file"},
                              "sim_rl": {"seconds": 640.0, "source": "metrics file"}}
    assert body["stages_seconds_total"] == 940.5
    assert len(body["load_avg"]) == 3 and {c["id"] for c in body["checks"]} >= {"environment"}
    # before the evidence stage ran: the same numbers, collected, without PNGs
    shutil.rmtree(s.output_dir)
    body = payload(s, {"profile": "evidence"}, uri=None)
    assert body["charts"] == {} and by_id(body["checks"], "environment")["status"] == PASS


def test_the_stage_logs_its_files_to_its_mlflow_run(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow

    from tasks._runner import main
    from tasks.evidence import STAGE, inputs
    from tasks.evidence import run as body

    monkeypatch.chdir(run)
    (run / "params.yaml").write_text("seed: 0\nprofile: evidence\nevidence: {env_domains: 6}\n"
                                     "profiles: {evidence: {}}\n")
    metrics = main(STAGE, body, inputs, argv=["--params", "params.yaml"])
    assert metrics["checks"] == {"environment": PASS, "card_decisions": FAIL, "turing_distance": PASS,
                                 "agent_vs_sft": PASS, "claims_size": FAIL}
    assert metrics["curve_stages"] == 3 and metrics["curve_points"] == 12 and metrics["charts"] == 2
    assert load(run / "metrics" / "evidence.json") == metrics
    [found] = mlflow.search_runs(search_all_experiments=True, output_format="list",
                                 filter_string="tags.`mimesis.stage` = 'evidence'")
    logged = {a.path for a in mlflow.MlflowClient().list_artifacts(found.info.run_id, "evidence")}
    assert logged == {"evidence/claims.md", "evidence/evidence.json", "evidence/simulator_curves.png",
                      "evidence/agent_curves.png"}
    assert found.data.metrics["checks_passed"] == 3.0


def test_stage_seconds_from_mlflow_runs_of_the_profile(run: Path, mlflow_store: str) -> None:
    from benchmarks.evidence import stage_seconds
    from mimesis_rl.tracking import stage_run

    with stage_run("sim_rl", {"profile": "evidence"}):
        pass
    with stage_run("agent_sft", {"profile": "demo"}):  # another profile's run: not this run's time
        pass
    with pytest.raises(RuntimeError), stage_run("sim_eval", {"profile": "evidence"}):
        raise RuntimeError("killed")  # a failed attempt: no stage time
    table = stage_seconds(run / "metrics", mlflow_store, "mimesis", "evidence")
    assert set(table) == {"sim_rl", "agent_eval"}
    assert table["sim_rl"]["source"] == "mlflow run duration" and table["sim_rl"]["seconds"] >= 0
    assert table["agent_eval"] == {"seconds": 300.5, "source": "metrics file"}


def test_grpo_curve_is_drawn_after_the_sft_steps_it_continues() -> None:
    from mimesis_rl.report.curves import panels

    stages = {"sim_sft": [{"step": 0, "decision_accuracy": 0.5}, {"step": 150, "decision_accuracy": 0.6}],
              "sim_rl": [{"step": 0, "decision_accuracy": 0.6, "seconds": 9.0},
                         {"step": 12, "decision_accuracy": 0.7}]}
    (metric, lines), = panels("simulator", stages)
    assert metric == "decision_accuracy"
    assert lines["sim_sft"] == [(0, 0.5), (150, 0.6)]
    assert lines["sim_rl"] == [(150, 0.6), (162, 0.7)]  # GRPO's step 0 is SFT's last model
    alone = panels("simulator", {"sim_rl": stages["sim_rl"]})[0][1]
    assert alone["sim_rl"] == [(0, 0.6), (12, 0.7)]  # no SFT curve recorded: its own steps
