from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mimesis_rl.cli import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def test_info_names_profile_tracking_and_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = runner.invoke(app, ["info"])
    assert result.exit_code == 0, result.output
    assert "profile      : demo" in result.output or "profile      : tiny" in result.output
    assert "tracking URI : sqlite:///" in result.output
    assert "torch" in result.output and "mlflow" in result.output


def test_run_outside_a_checkout_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run"])
    assert result.exit_code == 2
    assert "no dvc.yaml" in result.output


def test_every_group_has_help() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for group in ("run", "stage", "info", "data", "envs"):
        assert group in result.output
