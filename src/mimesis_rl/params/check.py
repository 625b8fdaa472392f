"""Checking params.yaml against its typed shape (mimesis_rl.params.schema), with errors a person can act on.

Why: `check_params` validates the defaults and every profile overlay (and each profile's merged
result) before any stage runs; errors name the file and the key path (`params.yaml:
profiles.tiny.sim_sft.lora.r: ...`) and, for an unknown key, the nearest known one. It also checks
what one key's type cannot say (fractions summing to 1, min <= max, TRL fields passed through at a
training section's top level, panel keys). `load_params` (mimesis_rl.config) runs it; so do
`mimesis params check` and the Prefect pipeline's first step.
"""

from __future__ import annotations

import copy
import math
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

from pydantic import TypeAdapter, ValidationError
from typing_extensions import is_typeddict

from mimesis_rl.params.schema import (
    SECTIONS,
    AgentRL,
    AgentRLVariant,
    AgentSFT,
    EnvDialogues,
    Leave,
    Lora,
    PanelMember,
    ParamsFile,
    Sampling,
    Sections,
    SimRL,
    SimSFT,
    Training,
)
from mimesis_rl.settings import did_you_mean

_FILE = TypeAdapter(ParamsFile)
_SECTIONS = TypeAdapter(Sections)


class ParamsError(ValueError):
    """params.yaml is malformed; `problems` lists each one as `file: key.path: what`."""

    def __init__(self, path: str | Path, problems: list[str]) -> None:
        self.path, self.problems = str(path), problems
        shown = "\n  ".join(problems)
        super().__init__(problems[0] if len(problems) == 1 else
                         f"params check failed ({len(problems)} problems):\n  {shown}")


def _loc(prefix: str, loc: tuple[Any, ...]) -> str:
    parts = [prefix] if prefix else []
    parts += [f"[{p}]" if isinstance(p, int) else str(p) for p in loc]
    return ".".join(parts).replace(".[", "[")


def _members(tp: Any) -> list[Any]:
    """The types a field may hold: Annotated and unions unwrapped."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _members(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]


def _known_keys(root: Any, loc: tuple[Any, ...]) -> list[str]:
    """The keys the schema knows where `loc` points (its parent mapping), for a "did you mean"."""
    tp: Any = root
    for part in loc[:-1]:
        step = None
        for member in _members(tp):
            if is_typeddict(member) and isinstance(part, str):
                step = get_type_hints(member).get(part)
            elif get_origin(member) is dict and isinstance(part, str):
                step = get_args(member)[1]
            elif get_origin(member) is list and isinstance(part, int):
                step = get_args(member)[0]
            if step is not None:
                break
        if step is None:
            return []
        tp = step
    return sorted({k for m in _members(tp) if is_typeddict(m) for k in get_type_hints(m)})


def _problems(exc: ValidationError, prefix: str = "", root: Any = None) -> list[str]:
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        # pydantic names the union member it tried (`str`, `list[...]`): drop such type names
        loc = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in _TYPE_NAMES)))
        where = _loc(prefix, loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            out.append(f"{where}: unknown key{did_you_mean(str(loc[-1]), _known_keys(root, loc))}")
        else:
            given = err.get("input")
            hint = ""
            if isinstance(given, str) and _looks_numeric(given):
                hint = " (quoted, or YAML 1.1 read it as text: write 1.0e-3, not 1e-3)"
            shown = "" if any(str(p) in SECRET_KEYS for p in loc) else f" (got {given!r})"  # never echo a key
            out.append(f"{where}: {err['msg']}{shown}{hint}"[:300])
    return sorted(set(out))


SECRET_KEYS = frozenset({"api_keys", "api_key"})


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_TYPE_NAMES = {"str", "int", "float", "bool", "none", "literal", "function-after", "constrained-float",
               "constrained-int", "constrained-str", "dict", "list", "tuple"}


TRL_ALIASES = {"batch_size": "per_device_train_batch_size", "grad_accum": "gradient_accumulation_steps"}
_TRL_FIELDS: dict[str, set[str] | None] = {}


def _trl_fields(config: str) -> set[str] | None:
    """Field names of trl.<config> (SFTConfig, GRPOConfig); None when TRL cannot be imported."""
    if config not in _TRL_FIELDS:
        try:
            import dataclasses

            import trl

            _TRL_FIELDS[config] = {f.name for f in dataclasses.fields(getattr(trl, config))}
        except Exception:  # noqa: BLE001 - no TRL here: such keys cannot be checked, so they are refused
            _TRL_FIELDS[config] = None
    return _TRL_FIELDS[config]


def _trl_blocks(params: Mapping[str, Any]) -> list[tuple[str, Any, type, str]]:
    """(where, block, schema model, TRL config) of every section whose TRL fields pass through."""
    out: list[tuple[str, Any, type, str]] = [
        ("sim_sft", params.get("sim_sft"), SimSFT, "SFTConfig"),
        ("sim_rl", params.get("sim_rl"), SimRL, "GRPOConfig"),
        ("agent_sft", params.get("agent_sft"), AgentSFT, "SFTConfig"),
        ("agent_rl", params.get("agent_rl"), AgentRL, "GRPOConfig")]
    agent_rl = params.get("agent_rl")
    variants = agent_rl.get("variants") if isinstance(agent_rl, Mapping) else None
    if isinstance(variants, Mapping):
        out += [(f"agent_rl.variants.{name}", block, AgentRLVariant, "GRPOConfig")
                for name, block in variants.items()]
    return out


def _trl_extras(params: Mapping[str, Any], pre: str) -> list[str]:
    """Top-level keys of a training section that the schema does not name must be TRL fields."""
    out = []
    for section, block, model, config in _trl_blocks(params):
        if not isinstance(block, Mapping):
            continue
        extra = [k for k in block if k not in model.__annotations__ and k not in Training.__annotations__]
        if not extra:
            continue
        fields = _trl_fields(config) or set()
        for key in extra:
            if TRL_ALIASES.get(key, key) not in fields:
                known = {*model.__annotations__, *Training.__annotations__, *fields, *TRL_ALIASES}
                out.append(f"{pre}{section}.{key}: unknown key (not a {section} key "
                           f"nor a TRL {config} field){did_you_mean(key, known)}")
    return out


def _sim_sft_keys(sim_sft: Mapping[str, Any]) -> set[str]:
    """Keys `sim_panel` may lay over `sim_sft`: its fields and the keys of its nested blocks."""
    keys = set(SimSFT.__annotations__) | set(Training.__annotations__)
    for value in sim_sft.values():
        if isinstance(value, Mapping):
            keys |= set(value)
    for block in (Lora, Leave, EnvDialogues, Sampling):
        keys |= set(block.__annotations__)
    return keys


def _cross_checks(params: Mapping[str, Any], where: str) -> list[str]:
    """What one key's type cannot say: fractions summing to 1, min <= max, panel keys."""
    out: list[str] = []
    pre = f"{where}." if where else ""
    fractions = (params.get("split") or {}).get("fractions")
    if isinstance(fractions, Mapping):
        if "train" not in fractions:
            out.append(f"{pre}split.fractions: needs a `train` share (got {dict(fractions)})")
        total = sum(v for v in fractions.values() if isinstance(v, int | float))
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            out.append(f"{pre}split.fractions: must sum to 1, got {total:.6g} from {dict(fractions)}")
    v = params.get("validate") or {}
    for low, high in (("min_chars", "max_chars"), ("min_turns", "max_turns")):
        a, b = v.get(low), v.get(high)
        if isinstance(a, int) and isinstance(b, int) and a > b:
            out.append(f"{pre}validate.{low}: {a} is above validate.{high} ({b})")
    out += _trl_extras(params, pre)
    panel = params.get("sim_panel") or {}
    if isinstance(panel, Mapping):
        known = _sim_sft_keys(params.get("sim_sft") or {}) | {"members"}
        member_keys = set(PanelMember.__annotations__) | known | {"output_dir"}
        members = panel.get("members") or {}
        laid = [(f"sim_panel.{k}", k) for k in panel if k not in known]
        laid += [(f"sim_panel.members.{n}.{k}", k) for n, m in members.items() if isinstance(m, Mapping)
                 for k in m if k not in member_keys]
        fields = (_trl_fields("SFTConfig") or set()) if laid else set()
        for where, key in laid:  # a key that is neither goes to sim_sft's top level: a TRL field there
            if TRL_ALIASES.get(key, key) not in fields:
                hint = did_you_mean(key, member_keys | fields | set(TRL_ALIASES))
                out.append(f"{pre}{where}: unknown key (not a sim_sft key nor a TRL SFTConfig field){hint}")
    return out


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` laid over `base`, mappings merged key by key: how a profile applies to the defaults."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def check_raw(raw: Any, path: str | Path = "params.yaml", complete: bool = True) -> list[str]:
    """Every problem of a parsed params file (defaults, overlays, each merged profile); [] = fine.

    complete: every section must be present (`mimesis params check`); a stage asks only for its own
    (tests and scratch checkouts carry a few sections)."""
    if not isinstance(raw, Mapping):
        return [f"(top level): the file must hold a mapping of sections, got {type(raw).__name__}"]
    problems: list[str] = []
    try:
        _FILE.validate_python(raw)
    except ValidationError as exc:
        problems += _problems(exc, root=ParamsFile)
    missing = [s for s in SECTIONS if s not in raw]
    if missing and complete:
        problems.append(f"(top level): missing section(s) {', '.join(missing)}")
    profiles = raw.get("profiles") or {}
    defaults = {k: v for k, v in raw.items() if k not in ("profiles", "profile")}
    problems += _cross_checks(defaults, "")
    if isinstance(profiles, Mapping):
        name = raw.get("profile", "demo")
        if isinstance(name, str) and profiles and name not in profiles:
            problems.append(f"profile: unknown profile {name!r}; known: {', '.join(sorted(profiles))}")
        for name, overlay in profiles.items():
            if isinstance(overlay, Mapping) and not problems:
                merged = deep_merge(defaults, dict(overlay))
                try:
                    _SECTIONS.validate_python(merged)
                except ValidationError as exc:
                    problems += _problems(exc, f"profiles.{name} (merged)", root=Sections)
                problems += _cross_checks(merged, f"profiles.{name} (merged)")
    return [f"{path}: {p}" for p in problems]


def read_raw(path: str | Path) -> dict[str, Any]:
    """The parsed file, or a ParamsError naming the file (and the line of a YAML syntax error)."""
    import yaml

    from mimesis_rl.fsutil import PathError, check_input_file

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(f"{path}: params file not found (run from the project root)")
    try:
        check_input_file(path, "params file")
    except PathError as exc:
        raise ParamsError(path, [str(exc)]) from None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ParamsError(path, [f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    if not text.strip():
        raise ParamsError(path, [f"{path}: the file is empty (expected the params sections)"])
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParamsError(path, [f"{path}: {at}YAML syntax error: {what}"]) from None
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        raise ParamsError(path, [f"{path}: the file must hold a mapping of sections, got {kind}"])
    return raw


def check_params(path: str | Path, complete: bool = True) -> dict[str, Any]:
    """Read and check params.yaml; returns the raw mapping or raises ParamsError listing every problem."""
    raw = read_raw(path)
    problems = check_raw(raw, path, complete=complete)
    if problems:
        raise ParamsError(path, problems)
    return raw
