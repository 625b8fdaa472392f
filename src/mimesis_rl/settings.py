"""The one way a stage's settings dataclass is built from its params.yaml section.

Why: every stage reads its section into a frozen dataclass (`SFTSettings`, `ServeSettings`, ...), and
each used to carry its own copy of the unknown-key check, each with its own wording. Here is the one
copy: `from_section` refuses a key the dataclass does not know with an error that names the file, the
key path and the nearest known key (`params.yaml: rollout.agent_tokens: unknown key (did you mean
`agent_max_new_tokens`?)`), the same form as `mimesis params check` (mimesis_rl.params.check), and
names a required key that is missing instead of a bare TypeError.

It sits at the bottom of the package (it imports nothing of mimesis_rl), so every layer can use it.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

PARAMS_FILE = "params.yaml"


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """` (did you mean `x`?)` for the known key closest to a misspelt one, else ``."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


def key_path(where: str, key: Any) -> str:
    """`where.key` (`key` alone at the top level)."""
    return f"{where}.{key}" if where else str(key)


def field_names(cls: type) -> set[str]:
    """The fields a settings dataclass takes."""
    return {f.name for f in dataclasses.fields(cls)}


def check_keys(section: Mapping[str, Any], known: Collection[str], where: str,
               path: str | Path = PARAMS_FILE) -> None:
    """Refuse every key of `section` not in `known`: a ValueError naming file, key path, nearest key."""
    unknown = sorted((k for k in section if k not in known), key=str)
    if not unknown:
        return
    problems = [f"{path}: {key_path(where, k)}: unknown key{did_you_mean(str(k), known)}" for k in unknown]
    raise ValueError("; ".join(problems) + f"; known: {', '.join(sorted(known))}")


def from_section(cls: type[T], section: Mapping[str, Any] | None, where: str,
                 path: str | Path = PARAMS_FILE, *, skip: Collection[str] = (), **nested: Any) -> T:
    """`cls(**section)` for a params.yaml section at key path `where` of file `path`.

    Unknown keys are refused (see `check_keys`); a required field left out is an error naming it.
    skip: keys of the section that the caller reads itself (they are known, not passed on).
    nested: values the caller built itself (sub-blocks as their own settings), laid over the section.
    """
    values = dict(section or {})
    fields = field_names(cls)  # type: ignore[arg-type]
    check_keys(values, fields | set(skip), where, path)
    for key in skip:
        values.pop(key, None)
    values.update(nested)
    missing = [f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
               if f.init and f.name not in values and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ValueError("; ".join(f"{path}: {key_path(where, k)}: missing (a required key)"
                                   for k in missing))
    return cls(**values)
