"""The run's commit tag: code edits make it dirty, what DVC writes during a run does not."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mimesis_rl.tracking.lineage import git_commit


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root, check=True,
                   capture_output=True)


def test_dvc_bookkeeping_is_not_dirty_but_code_is(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    for name, text in (("code.py", "x = 1\n"), ("dvc.lock", "v1\n"), ("data/.gitignore", "/a\n")):
        (tmp_path / name).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "init")
    head = git_commit(tmp_path)
    assert len(head) == 40
    (tmp_path / "dvc.lock").write_text("v2\n")
    (tmp_path / "data/.gitignore").write_text("/a\n/b\n")
    _git(tmp_path, "add", "dvc.lock")  # DVC's autostage
    assert git_commit(tmp_path) == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == f"{head}-dirty"
