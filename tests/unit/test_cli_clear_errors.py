"""Commands that used to end in a traceback or leave litter: one clear line, the right exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mimesis_rl.cli import app

runner = CliRunner()


# `envs rollout --user learned:/nonexistent`: a row of tests/unit/test_bad_input_table.py


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_serve_refuses_a_port_out_of_range_before_loading(port: str) -> None:
    result = runner.invoke(app, ["serve", "--model", "/nonexistent", "--port", port])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "port" in result.output
    assert "less than or equal to 65535" in result.output or "greater than or equal to 1" in result.output


def test_sim_eval_outside_a_checkout_leaves_no_mlflow_db(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    conv = {"conversation_id": "c", "source": "s", "domain": "d",
            "turns": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]}
    (tmp_path / "data.jsonl").write_text(json.dumps(conv) + "\n")
    result = runner.invoke(app, ["sim", "eval", "--model", str(tmp_path / "no-model"), "--data", "data.jsonl",
                                 "--out", "out", "--labeler", "rules", "--baseline", "assistant"])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "not tracked in MLflow" in result.output
    assert not list(tmp_path.rglob("mlflow.db")) and not (tmp_path / "mlartifacts").exists()
