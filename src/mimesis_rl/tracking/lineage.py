"""What a run was made from: git commit and the DVC-style content hashes of its inputs."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path


def git_commit(cwd: str | Path | None = None) -> str:
    """HEAD's commit id with a `-dirty` suffix when tracked files differ; `unknown` outside git.

    What DVC itself writes while the pipeline runs (`dvc.lock`, `.gitignore` entries for outputs)
    does not count: otherwise every stage after the first would tag its run dirty.
    """
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude,glob)**/dvc.lock", ":(exclude,glob)**/.gitignore"], cwd=cwd,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if dirty else head


def _file_md5(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def content_hash(path: str | Path) -> str:
    """DVC 3's hash of a path: md5 of a file; for a folder, md5 of its sorted file listing + `.dir`.

    Matches the `md5` fields DVC writes to dvc.lock, so a run's tags can be joined to a DVC revision.
    """
    path = Path(path)
    if not path.exists():
        return "missing"
    if path.is_file():
        return _file_md5(path)
    entries = [
        {"md5": _file_md5(p), "relpath": p.relative_to(path).as_posix()}
        for p in sorted(path.rglob("*"), key=lambda q: q.relative_to(path).as_posix())
        if p.is_file()
    ]
    listing = json.dumps(entries, sort_keys=True).encode()
    return hashlib.md5(listing).hexdigest() + ".dir"
