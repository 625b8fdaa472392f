"""Atomic file writes: every stage output appears whole or not at all."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Write to a temp file beside `path`, then rename over it; on error the target is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    if "b" in mode:
        encoding = None
    try:
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs get ordinary permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_open(path) as handle:
        json.dump(obj, handle, indent=2, sort_keys=True, default=str)
        handle.write("\n")


def write_text(path: str | Path, text: str) -> None:
    with atomic_open(path) as handle:
        handle.write(text)


def swap_in_dir(staged: str | Path, target: str | Path) -> None:
    """Replace folder `target` by the fully written folder `staged`: outputs appear whole or not at all."""
    staged, target = Path(staged), Path(target)
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staged.rename(target)
    shutil.rmtree(old, ignore_errors=True)
