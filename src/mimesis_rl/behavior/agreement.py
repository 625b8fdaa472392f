"""Agreement between two labelling passes over the same gold items: Cohen's kappa per pattern."""

from __future__ import annotations

import math
from pathlib import Path

from sklearn.metrics import cohen_kappa_score

from mimesis_rl.behavior.gold.loader import PASS1_FILE, PASS2_FILE, GoldError
from mimesis_rl.behavior.taxonomy import unknown_patterns
from mimesis_rl.data.jsonl import BadRecord, iter_jsonl
from mimesis_rl.data.schema import PATTERN_NAMES


def read_label_file(path: str | Path) -> dict[str, tuple[str, ...]]:
    """id -> patterns from a JSONL of {"id", "patterns"}; bad lines raise GoldError naming file:line:field."""
    path = Path(path)
    out: dict[str, tuple[str, ...]] = {}
    for line, rec in iter_jsonl(path):
        if isinstance(rec, BadRecord):
            raise GoldError(str(rec))
        gid, patterns = rec.get("id"), rec.get("patterns")
        if not isinstance(gid, str) or not gid:
            raise GoldError(f"{path}:{line}: id: missing or not a string")
        if gid in out:
            raise GoldError(f"{path}:{line}: id: duplicate id {gid!r}")
        if not isinstance(patterns, list):
            raise GoldError(f"{path}:{line}: patterns: expected a list")
        unknown = unknown_patterns(patterns)
        if unknown:
            raise GoldError(f"{path}:{line}: patterns: unknown pattern names {unknown}")
        out[gid] = tuple(patterns)
    return out


def kappa_per_pattern(
    first: dict[str, tuple[str, ...]], second: dict[str, tuple[str, ...]]
) -> dict[str, float]:
    """Cohen's kappa of each pattern over the shared ids (NaN where neither pass ever used the pattern)."""
    if set(first) != set(second):
        only = sorted(set(first) ^ set(second))
        raise GoldError(f"the two passes label different items, e.g. {only[:3]}")
    ids = sorted(first)
    out: dict[str, float] = {}
    for name in PATTERN_NAMES:
        a = [int(name in first[i]) for i in ids]
        b = [int(name in second[i]) for i in ids]
        if sum(a) + sum(b) == 0:
            out[name] = math.nan
        elif a == b:
            out[name] = 1.0
        else:
            out[name] = float(cohen_kappa_score(a, b))
    return out


def gold_agreement(pass1: str | Path = PASS1_FILE, pass2: str | Path = PASS2_FILE) -> dict[str, float]:
    """Kappa per pattern plus `macro` (their mean) and `items` for the packaged two passes."""
    first, second = read_label_file(pass1), read_label_file(pass2)
    kappas = kappa_per_pattern(first, second)
    defined = [v for v in kappas.values() if not math.isnan(v)]
    return {
        **kappas,
        "macro": sum(defined) / len(defined) if defined else math.nan,
        "items": float(len(first)),
    }
