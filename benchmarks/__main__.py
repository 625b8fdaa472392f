"""Run every benchmark module (or the ones named): `python -m benchmarks [ingest_validate rollout ...]`."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def available() -> list[str]:
    here = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))


def by_default(name: str) -> bool:
    """Modules that need inputs (trained agents, a project folder) set RUN_BY_DEFAULT = False."""
    return getattr(importlib.import_module(f"benchmarks.{name}"), "RUN_BY_DEFAULT", True)


def main(argv: list[str]) -> int:
    everything = available()
    names = argv or [n for n in everything if by_default(n)]
    if not argv and len(names) < len(everything):
        print("not run by default (they need inputs; see each module's docstring): "
              + ", ".join(n for n in everything if n not in names))
    unknown = sorted(set(names) - set(everything))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {', '.join(everything)}", file=sys.stderr)
        return 2
    failed = []
    for name in names:
        print(f"== benchmark {name}", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        try:
            module.main([])
        except (Exception, SystemExit) as exc:  # one broken benchmark must not hide the others' numbers
            print(f"!! {name} failed: {exc}", file=sys.stderr)
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
