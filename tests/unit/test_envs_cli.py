"""`mimesis envs list | panel | rollout`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mimesis_rl.cli import app
from mimesis_rl.cli import envs as cli_envs
from mimesis_rl.envs import specs
from mimesis_rl.envs.registry import DOMAINS

runner = CliRunner()


def test_list_shows_the_eight_domains() -> None:
    result = runner.invoke(app, ["envs", "list"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(DOMAINS) and len(lines) == 8


def test_panel_lists_roles() -> None:
    result = runner.invoke(app, ["envs", "panel"])
    assert result.exit_code == 0, result.output
    assert "unseen" in result.output and "scripted-chaotic" in result.output


def test_rollout_writes_transcripts_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    result = runner.invoke(
        app,
        [
            "envs",
            "rollout",
            "--env",
            "support",
            "--agent",
            "scripted",
            "--user",
            "scripted:cooperative",
            "-n",
            "5",
            "--out",
            str(out),
            "--seed",
            "7",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["n"] == 5 and summary["written"] == 5 and summary["success_rate"] == 1.0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["seed"] for r in records] == [7, 8, 9, 10, 11]
    assert all(r["user"] == "scripted:cooperative" and r["verdict"] for r in records)


def test_rollout_bad_specs_fail_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a model layer, model specs are 'not supported yet' (exit 3); bad specs exit 2."""
    monkeypatch.setattr(cli_envs, "RESOLVER_MODULES", ())
    monkeypatch.setattr(specs, "_USER_RESOLVERS", {})
    monkeypatch.setattr(specs, "_AGENT_RESOLVERS", {})
    out = str(tmp_path / "t.jsonl")
    args = ["envs", "rollout", "--env", "support", "--out", out]
    result = runner.invoke(app, [*args, "--agent", "models:/mimesis-agent@champion"])
    assert result.exit_code == 3 and "needs a model resolver" in result.output
    result = runner.invoke(app, [*args, "--user", "prompted:busy_parent"])
    assert result.exit_code == 3 and "'prompted' resolver" in result.output
    result = runner.invoke(app, ["envs", "rollout", "--env", "chess", "--out", out])
    assert result.exit_code == 2 and "unknown environment 'chess'" in result.output
    result = runner.invoke(app, [*args, "--user", "robot"])
    assert result.exit_code == 2 and "bad user spec" in result.output
    assert not Path(out).exists()


def test_load_resolvers_skips_missing_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_envs, "RESOLVER_MODULES", ("mimesis_rl.no_such_layer.resolvers",))
    assert cli_envs.load_resolvers() == []
