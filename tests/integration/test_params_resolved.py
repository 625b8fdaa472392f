"""Each stage's DVC params are its resolved sections (`params.resolved.yaml`, the `params` stage): real
DVC in a scratch repository decides what reruns after an edit to params.yaml."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mimesis_rl.config import RESOLVED_FILE, resolved_stale, resolved_text

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
PARAMS = {
    "profile": "a",
    "seed": 1,
    "split": {"fractions": {"train": 0.8, "val": 0.1, "test": 0.1}},
    "validate": {"max_bad_share": 0.05},
    "profiles": {"a": {"split": {"fractions": {"train": 0.7, "val": 0.2, "test": 0.1}}},
                 "b": {"validate": {"max_bad_share": 0.2}}},
}
STAGE = {"cmd": "python -c \"print('ran')\" > {out}", "outs": ["{out}"]}


def _write(root: Path, params: dict) -> None:
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _dvc(root: Path, *args: str) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # `mimesis` from this venv
    done = subprocess.run([str(Path(sys.executable).parent / "dvc"), *args], cwd=root, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """git + DVC, the `params` stage as dvc.yaml has it, and two stages that read one section each."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    _dvc(tmp_path, "init", "-q")
    _write(tmp_path, PARAMS)
    ours = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["params"]
    stages = {"params": {**ours, "deps": ["params.yaml"]}}
    for name, section in (("splits", "split"), ("checks", "validate")):
        stages[name] = {"cmd": STAGE["cmd"].format(out=f"{name}.txt"), "outs": [f"{name}.txt"],
                        "params": [{RESOLVED_FILE: ["profile", "seed", section]}]}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    return tmp_path


def _ran(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


def test_an_edit_reruns_only_the_stages_whose_resolved_settings_it_changes(project: Path) -> None:
    assert _ran(_dvc(project, "repro")) == {"params", "splits", "checks"}
    resolved = yaml.safe_load((project / RESOLVED_FILE).read_text())
    assert resolved["split"]["fractions"]["train"] == 0.7 and "profiles" not in resolved  # overlay applied

    edited = {**PARAMS, "profiles": {**PARAMS["profiles"], "b": {"validate": {"max_bad_share": 0.3}}}}
    _write(project, edited)  # another profile: before, every stage listed `profiles` and reran
    assert _ran(_dvc(project, "repro")) == {"params"}

    edited["profiles"]["a"] = {"split": {"fractions": {"train": 0.6, "val": 0.3, "test": 0.1}}}
    _write(project, edited)  # the active profile's overlay of one section: that section's stage only
    assert _ran(_dvc(project, "repro")) == {"params", "splits"}
    assert "up to date" in _dvc(project, "status")


def test_a_stage_dvc_runs_refuses_a_resolved_file_older_than_params(project: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks._runner import checked_params

    monkeypatch.chdir(project)
    monkeypatch.setenv("DVC_STAGE", "splits")
    assert "missing" in resolved_stale(project / "params.yaml", project / RESOLVED_FILE)
    assert checked_params("split", None, None)["seed"] == 1  # a project without the `params` stage
    (project / RESOLVED_FILE).write_text(resolved_text(project / "params.yaml"))
    assert checked_params("split", None, None)["split"]["fractions"]["train"] == 0.7  # current: read

    _write(project, {**PARAMS, "seed": 2})  # edited since the `params` stage wrote it
    with pytest.raises(SystemExit) as exc:
        checked_params("split", None, None)
    assert exc.value.code == 2
    assert "older than" in resolved_stale(project / "params.yaml", project / RESOLVED_FILE)
    monkeypatch.delenv("DVC_STAGE")
    assert checked_params("split", None, None)["seed"] == 2  # run by hand, not by DVC: params.yaml as it is
