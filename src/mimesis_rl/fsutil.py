"""Atomic file writes: every stage output appears whole or not at all."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

_UMASK = os.umask(0)
os.umask(_UMASK)


def write_target(path: str | Path, role: str = "output") -> Path:
    """Where writing `path` lands: the path itself, or, for a symlink, the file it points to (written
    through, never replaced by a plain file). A link that cannot be followed (a loop) is a PathError."""
    path = Path(path)
    if not path.is_symlink():
        return path
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:  # a dangling link: the file it names is created
        return Path(os.path.realpath(path))
    except OSError as exc:
        raise PathError(f"{path}: {role} is a symlink that cannot be followed "
                        f"({exc.strerror or exc}; a link loop?)") from None


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Write to a temp file beside `path`, then rename over it; on error the target is untouched.
    A symlinked `path` is written through: its target is replaced, the link stays."""
    path = write_target(path)
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


def read_json(path: str | Path) -> Any | None:
    """A stage's JSON, or None when the file is not there (readers then say "not measured"); malformed
    JSON is an error naming the file."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def write_text(path: str | Path, text: str) -> None:
    with atomic_open(path) as handle:
        handle.write(text)


def swap_in_dir(staged: str | Path, target: str | Path) -> None:
    """Replace folder `target` by the fully written folder `staged`: outputs appear whole or not at all.
    A symlinked `target` is written through (the folder it points to is replaced, the link stays)."""
    staged, target = Path(staged), write_target(target, "output folder")
    if target.parent != staged.parent:  # through a link: stage beside the real folder (same file system)
        beside = target.with_name(f".{target.name}.staged")
        shutil.rmtree(beside, ignore_errors=True)
        shutil.move(str(staged), beside)
        staged = beside
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staged.rename(target)
    shutil.rmtree(old, ignore_errors=True)


class PathError(ValueError):
    """A path that cannot play its role: missing, a folder, unreadable, not writable, or shared.

    Raised before any work starts, so a run never dies half-way over a path it could have checked.
    """


def _same(a: Path, b: Path) -> bool:
    """Same file, through symlinks, `..` and relative paths; hard links too when both exist."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a symlink loop: it names no file, so it is no other role's file
        return False


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def check_distinct(paths: Mapping[str, str | Path | None]) -> None:
    """Refuse two roles (input, output, quarantine, rejects, ...) that name one file.

    Writing one over the other loses data without a word (the second atomic rename wins), so
    this runs before anything is read or written. Keys are the roles as the user knows them.
    """
    items = [(role, Path(p)) for role, p in paths.items() if p is not None and str(p) != ""]
    for i, (role_a, a) in enumerate(items):
        for role_b, b in items[i + 1:]:
            if _same(a, b):
                same = "" if str(a) == str(b) else f" ({a} and {b} resolve to {a.resolve()})"
                raise PathError(f"{b}: {role_b} is the same file as {role_a}{same}; "
                                "give them different paths")


def check_not_inside(paths: Mapping[str, str | Path | None], folder: str | Path, folder_role: str,
                     why: str) -> None:
    """Refuse files that lie inside `folder` (a folder that is replaced or read whole)."""
    folder = Path(folder)
    for role, p in paths.items():
        if p is not None and str(p) != "" and _inside(Path(p), folder):
            raise PathError(f"{p}: {role} lies inside {folder_role} {folder}, {why}; put it elsewhere")


def check_input_file(path: str | Path, role: str = "input") -> Path:
    """An existing, readable regular file, or one PathError naming the path and the cause. Special
    files (a device such as /dev/zero, a named pipe, a socket) are refused before they are opened:
    they never end, or block the reader forever."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise PathError(f"{path}: file not found ({role})") from None
    except OSError as exc:  # a symlink loop, a name too long, a component that is a file
        raise PathError(f"{path}: {role} cannot be opened: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise PathError(f"{path}: {role} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(info.st_mode) else "a device" if
                stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else
                "a socket" if stat.S_ISSOCK(info.st_mode) else "a special file")
        raise PathError(f"{path}: {role} is {kind}, not a regular file; save the data to a file first")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise PathError(f"{path}: {role} cannot be read: {exc.strerror or exc}") from None
    return path


def _nearest_existing(path: Path) -> Path:
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def check_output_file(path: str | Path, role: str = "output") -> Path:
    """A path whose file can be (re)written atomically: not a folder, and in a writable folder."""
    if str(path) == "":
        raise PathError(f"{role}: empty path")
    given, path = Path(path), write_target(path, role)
    if path.exists() and not path.is_dir() and not path.is_file():
        raise PathError(f"{given}: {role} is a special file (a device or a pipe), not a regular file")
    if path.is_dir():
        raise PathError(f"{given}: {role} is a folder; give a file path")
    _check_creatable(path.parent, path, role)
    return given


def check_output_dir(path: str | Path, role: str = "output folder") -> Path:
    """A folder that exists and is writable, or can be created under a writable folder (a symlink
    is followed; one that loops is a PathError)."""
    path = Path(path)
    real = write_target(path, role)
    if real.exists() and not real.is_dir():
        raise PathError(f"{path}: {role} is a file, not a folder")
    _check_creatable(real, path, role)
    return path


def _check_creatable(folder: Path, target: Path, role: str) -> None:
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise PathError(f"{target}: {role} cannot be created: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PathError(f"{target}: {role} cannot be written: folder {existing} is not writable")


def os_error_line(exc: OSError) -> str:
    """One line for an OSError met while reading or writing: the path, then the cause."""
    where = exc.filename if exc.filename is not None else ""
    cause = exc.strerror or str(exc)
    return f"{where}: {cause}" if where else cause
