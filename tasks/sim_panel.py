"""Stage `sim_panel@<member>`: train one learned member of the unseen panel (demo-size simulator SFT).

    python -m tasks.sim_panel --member seed1 [--profile tiny]

Why: the unseen panel needs learned simulators that no agent trained against and that learned from
something the training simulator did not. Each member is the simulator SFT (`simulator.sft.train_sft`,
the training simulator's own code) with `sim_panel.members.<member>` laid over the `sim_sft` settings:

- `seed1`: the training data, another seed (`seed_offset`);
- `heldout`: the `val` split — `sim_sft` only scores a few of its windows for eval loss and never
  trains on it, `sim_rl` reads `train` only, and `sim_eval` reads `test`;
- `casino`: CaSiNo (`../shared/data/casino`) when present, reasoning traces from the template
  rationalizer; when absent the member is skipped: its folder holds `skipped.json` saying why.

Each built member is registered as its own model (`mimesis-simulator-<member>`, alias `candidate`),
never `mimesis-simulator`, so nothing that trains agents can pick it up; the panel's disjointness
check refuses it among training users.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from mimesis_rl.fsutil import write_json
from mimesis_rl.settings import from_section
from mimesis_rl.tracking import content_hash
from mimesis_rl.tracking.registration import RegistrySettings
from tasks._runner import main

STAGE = "sim_panel"
log = logging.getLogger("mimesis")


@dataclass(frozen=True)
class MemberSettings:
    """A member's own keys (the rest of its section overrides `sim_sft`'s): its data (`train`, `val`, or
    `casino` from `casino_dir`, at most `casino_limit` dialogues), a seed offset, whether a missing input
    skips it (`optional`), and its `registry:` block (default name `mimesis-simulator-<member>`)."""

    data: str = "train"
    seed_offset: int = 0
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    optional: bool = False
    casino_dir: str | None = None
    casino_limit: int | None = None


MEMBER_KEYS = tuple(f.name for f in fields(MemberSettings))


def member_section(params: dict[str, Any], member: str) -> dict[str, Any]:
    members = (params.get(STAGE) or {}).get("members") or {}
    if member not in members:
        raise SystemExit(f"params.yaml {STAGE}.members: no member {member!r}; known: {', '.join(members)}")
    return dict(members[member] or {})


def place(section: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`section` with each override put where `sim_sft` keeps that key (top level, or inside a nested
    block such as `trainer:` that already holds it), so the panel's overrides survive a reshuffle of
    the SFT settings' layout; dict values merge into dict values."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in section.items()}
    for key, value in overrides.items():
        home = out
        if key not in out:
            holders = [v for v in out.values() if isinstance(v, dict) and key in v]
            home = holders[0] if holders else out
        if isinstance(value, dict) and isinstance(home.get(key), dict):
            home[key] = {**home[key], **value}
        else:
            home[key] = value
    return out


def settings(params: dict[str, Any], member: str) -> tuple[Any, MemberSettings]:
    """`sim_sft` settings with the panel's common overrides and the member's own laid over them,
    parsed by the `sim_sft` stage's own `settings` (precision switch included)."""
    from tasks import sim_sft

    common = {k: v for k, v in (params.get(STAGE) or {}).items() if k != "members"}
    own = member_section(params, member)
    mine = {k: own.pop(k) for k in MEMBER_KEYS if k in own}
    where = f"{STAGE}.members.{member}"
    extra = from_section(MemberSettings, mine, where, skip=("registry",),
                         registry=RegistrySettings.from_section(mine.get("registry"), f"{where}.registry"))
    section = dict(params.get("sim_sft") or {})
    section.pop("registry", None)
    for own_key in ("phases", "curve"):  # the training simulator's curriculum and learning curve are its
        section.pop(own_key, None)       # own (a member may set either): members are read at the panel
    section = place(place(section, common), own)
    section["output_dir"] = own.get("output_dir", f"models/simulator/panel/{member}")
    section["checkpoint_dir"] = f"checkpoints/sim_panel/{member}"
    s, _ = sim_sft.settings({**params, "sim_sft": {**section, "registry": {"register": False}}})
    return s, extra


def inputs(member: str):  # noqa: ANN201 - a closure for `_runner.main`
    def _inputs(params: dict[str, Any]) -> list[str]:
        s, extra = settings(params, member)
        paths = [s.base_model, extra.casino_dir or ""] if extra.data == "casino" else [
            s.train, s.base_model]
        return [p for p in paths if p]
    return _inputs


def _casino_train(extra: MemberSettings, workdir: Path, seed: int) -> tuple[Path, int]:
    """CaSiNo -> conversations with template reasoning on user turns (a JSONL under `workdir`)."""
    from mimesis_rl.behavior.reasoning.config import RationalizeSettings, build_rationalizer
    from mimesis_rl.data.ingest import SourceSpec, ingest
    from mimesis_rl.data.jsonl import read_conversations, write_jsonl

    source = Path(extra.casino_dir or "")
    raw, rejects = workdir / "casino.raw.jsonl", workdir / "casino.rejects.jsonl"
    files = sorted(source.glob("casino_train.json")) or sorted(source.glob("*.json"))
    report = ingest([SourceSpec("casino", str(files[0]))], raw, rejects,
                    limit_per_source=extra.casino_limit)
    conversations = read_conversations(raw)
    rationalizer = build_rationalizer(RationalizeSettings(backend="template"), seed=seed)
    out = workdir / "casino.jsonl"
    write_jsonl(out, (c.model_dump(mode="json") for c in rationalizer.rationalize(conversations)))
    log.info("sim_panel casino: %d conversations from %s (%d rejected)", len(conversations), files[0],
             report.rejected if hasattr(report, "rejected") else 0)
    return out, len(conversations)


def skip(output_dir: str, reason: str) -> dict[str, Any]:
    """An optional member whose input is absent: its folder says so (DVC needs the output)."""
    out = Path(output_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    write_json(out / "skipped.json", {"reason": reason})
    log.warning("sim_panel: skipped (%s)", reason)
    return {"skipped": 1, "reason": reason}


def register(output_dir: str, registry: RegistrySettings, member: str, data_version: str) -> dict[str, Any]:
    from mimesis_rl.simulator.registry import register_simulator

    return register_simulator(output_dir, registry, data_version, name=f"mimesis-simulator-{member}",
                              tags={"mimesis.panel_member": member, "mimesis.panel_role": "unseen"})


def run_member(member: str):  # noqa: ANN201 - a closure for `_runner.main`
    def _run(params: dict[str, Any]) -> dict[str, Any]:
        import dataclasses

        import mlflow

        from mimesis_rl.simulator.sft import train_sft

        s, extra = settings(params, member)
        seed = int(params.get("seed", 0)) + extra.seed_offset
        mlflow.log_params({"member": member, "member_seed": seed, "member_data": extra.data,
                           "member_train": s.train, "member_max_steps": s.max_steps})
        with tempfile.TemporaryDirectory(prefix="sim-panel-") as tmp:
            if extra.data == "casino":
                folder = Path(extra.casino_dir or "")
                if not folder.is_dir() or not list(folder.glob("*.json")):
                    return skip(s.output_dir, f"CaSiNo not found at {folder} (optional member)")
                train, n = _casino_train(extra, Path(tmp), seed)
                s = dataclasses.replace(s, train=str(train), val=None)
            elif not Path(s.train).exists():
                raise SystemExit(f"sim_panel@{member}: training data {s.train} not found")
            data_hash = content_hash(s.train)
            metrics = train_sft(s, seed=seed, data_hash=data_hash)
        metrics.update(register(s.output_dir, extra.registry, member, f"md5:{data_hash}"))
        metrics.update({"member": member, "seed": seed, "skipped": 0})
        return metrics
    return _run


def cli(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--member", required=True)
    known, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    member = known.member
    return main(f"{STAGE}@{member}", run_member(member), inputs(member), argv=rest)


if __name__ == "__main__":
    cli()
