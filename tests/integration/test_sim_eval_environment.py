"""The environment part of `sim_eval` on a tiny trained simulator (real SFT, real rollouts), and the
"one runtime" proof: the same seeded dialogue played through `mimesis envs rollout --user learned:…`
and through `UserSimulator` + `run_rollouts` directly gives the same user turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sim_support import tiny_base, tiny_simulator
from typer.testing import CliRunner

from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent
from mimesis_rl.eval.environment_metrics import REFERENCE, env_summary
from mimesis_rl.eval.environment_report import ENV_COLUMNS, env_markdown, heatmap
from mimesis_rl.eval.environment_run import run_environment
from mimesis_rl.eval.environment_settings import EnvironmentSettings
from mimesis_rl.simulator.runtime import UserSimulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def simulator_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("envsim")
    base = tiny_base(root / "base")
    return tiny_simulator(base, root / "simulator", steps=2)


def test_environment_part_reports_every_column(simulator_dir: Path, tmp_path: Path) -> None:
    sim = UserSimulator.load(simulator_dir, name="tiny", device="cpu", max_context_tokens=256)
    settings = EnvironmentSettings(dialogues=2, max_turns=2, first_seed=3)
    run = run_environment({"tiny": sim}, settings)

    assert list(run.rows) == [REFERENCE, "tiny"]
    for name in (REFERENCE, "tiny"):
        assert list(run.rows[name]) == list(DOMAINS)  # all 8 domains
        for domain, row in run.rows[name].items():
            assert row["dialogues"] == 2, (name, domain)
            for key in ("success_rate", "mean_reward", "success_ratio", "reward_ratio", "verbatim_repeats",
                        "want_never_share", "invalid_end_share", "user_turns", "end_reasons"):
                assert key in row, (name, domain, key)
    # The cooperative scripted user is the reference the scripted agent succeeds against.
    assert run.overall[REFERENCE]["success_rate"] > 0.5
    assert all(row["success_ratio"] == pytest.approx(1.0) for row in run.rows[REFERENCE].values()
               if row["success_rate"])
    # The simulator's own counts (one batch over all domains: per simulator): every user turn it was
    # asked for is accounted for.
    overall = run.overall["tiny"]
    assert overall["role_break_rate"] is not None and overall["failed_turn_rate"] is not None
    assert overall["samples"] >= overall["user_turns"] > 0
    # A turn that reached the agent is never empty; one that could not be made valid ended the dialogue.
    for record in run.transcripts:
        for turn in record["turns"]:
            if turn["role"] == "user" and not turn["content"].strip():
                assert turn["meta"]["end_reason"].startswith("invalid_turn"), record["episode_id"]
    # Same seeds (so the same goal cards) for every user side.
    seeds = {(r["simulator"], r["domain"]): sorted(r2["seed"] for r2 in run.transcripts
                                                   if r2["simulator"] == r["simulator"]
                                                   and r2["domain"] == r["domain"]) for r in run.transcripts}
    assert all(v == [3, 4] for v in seeds.values())

    lines = "\n".join(env_markdown(run))
    for _, title, _ in ENV_COLUMNS:
        assert title in lines
    assert lines.count("| tiny |") == 8 and "| **tiny** | **all** |" in lines
    summary = env_summary(run)
    assert {"success_rate", "contradiction_rate", "shopping.success_rate", "seconds"} <= set(summary["tiny"])
    assert heatmap(run, tmp_path / "environment.png").stat().st_size > 5000


def test_cli_rollout_and_user_simulator_give_the_same_user_turns(simulator_dir: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from mimesis_rl.cli import app
    from mimesis_rl.models.config import PrecisionSettings
    from mimesis_rl.models.inference.pool import ModelPool
    from mimesis_rl.rollout import run_rollouts
    from mimesis_rl.rollout.settings import RolloutSettings

    (tmp_path / "params.yaml").write_text(
        "profile: demo\nrollout:\n  user_max_context_tokens: 256\n  seed: 7\n"
        "models:\n  device: cpu\n  cpu_dtype: float32\nprofiles:\n  demo: {}\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "cli.jsonl"
    result = CliRunner().invoke(app, ["envs", "rollout", "--env", "shopping", "--agent", "scripted",
                                      "--user", f"learned:{simulator_dir}", "-n", "3", "--seed", "11",
                                      "--max-turns", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    cli = [json.loads(line) for line in out.read_text().splitlines()]

    # Directly: the runtime sim_eval uses, built with the rollout section's seed and window.
    conf = RolloutSettings(user_max_context_tokens=256, seed=7)
    sim = UserSimulator.load(simulator_dir, pool=ModelPool(PrecisionSettings(device="cpu")), seed=conf.seed,
                             max_context_tokens=conf.user_max_context_tokens)
    direct = run_rollouts(make_env("shopping", max_turns=3), scripted_agent("shopping"), sim, [11, 12, 13],
                          progress=False).records()

    def user_turns(records: list[dict]) -> list[list[tuple[str, str | None, bool]]]:
        return [[(t["content"], t["reasoning"], t["meta"].get("end_reason", "")) for t in r["turns"]
                 if t["role"] == "user"] for r in records]

    assert [r["seed"] for r in cli] == [r["seed"] for r in direct] == [11, 12, 13]
    assert user_turns(cli) == user_turns(direct)
    assert sum(len(turns) for turns in user_turns(direct)) >= 3  # at least the openings
    assert [r["end_reason"] for r in cli] == [r["end_reason"] for r in direct]
