"""The simulator panel: named user simulators, each with a declared role.

- `train`: simulators agents are trained against (the trained MIMESIS simulator and the training
  scripted users);
- `unseen`: evaluation simulators no agent ever trained against — scripted users with different
  behaviour mixes, prompted-LLM users with different personas, learned simulators from other seeds
  or data;
- `baseline`: the assistant-style prompted user the paper argues against, and the over-cooperative
  "tells everything at once" scripted user.

Members are spec strings (see `envs.specs`), so this module needs no model: prompted and learned
members are built lazily by a registered resolver, and `available` says which ones can be built now.
The panel refuses to exist if a training simulator is also in the unseen set.

Every unseen member is built by the pipeline or is pure Python: the learned ones by the DVC stage
`sim_panel@<key>` (a demo-size SFT on data the training simulator never trained on: another seed;
the `val` split, which `sim_sft` only scores and `sim_eval` never reads; CaSiNo when
`../shared/data/casino` exists), which writes `folder` and registers `mimesis-simulator-<key>@candidate`.
`status` tells built from missing without loading a model.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mimesis_rl.envs.personas import PERSONAS
from mimesis_rl.envs.protocols import UserSide
from mimesis_rl.envs.scripted.knobs import PRESETS
from mimesis_rl.envs.specs import can_build_user, make_user, split_user_spec

Role = Literal["train", "unseen", "baseline"]
ROLES: tuple[Role, ...] = ("train", "unseen", "baseline")
# `models:/name@alias` -> the version it points at, or None; `tracking.chain.registered_version` is the
# one callers pass (this package knows no registry).
RegistryLookup = Callable[[str], str | None]

@dataclass(frozen=True)
class PanelMember:
    """One simulator of the panel."""

    name: str
    role: Role
    spec: str
    description: str
    folder: str | None = None  # learned members: the pipeline output that holds the simulator
    stage: str | None = None  # the DVC stage that builds it
    optional: bool = False  # may be skipped by its stage (input data absent); never counted as built then

    @property
    def kind(self) -> str:
        return split_user_spec(self.spec)[0]


def _scripted(name: str, role: Role, preset: str, description: str) -> PanelMember:
    return PanelMember(name, role, f"scripted:{preset}", description)


DEFAULT_MEMBERS: tuple[PanelMember, ...] = (
    # train
    PanelMember(
        "mimesis-simulator",
        "train",
        "learned:models:/mimesis-simulator@champion",
        "the trained MIMESIS simulator (frozen) that agents train against",
        stage="sim_rl",
    ),
    _scripted("scripted-cooperative", "train", "cooperative", "answers every question, no surprises"),
    _scripted("scripted-train-mix", "train", "train_mix", "moderate mix of every difficult behaviour"),
    # baseline
    PanelMember(
        "assistant-baseline",
        "baseline",
        "prompted:assistant",
        "the base instruct model prompted to play the user (assistant-style)",
    ),
    _scripted("scripted-tell-all", "baseline", "tell_all", "over-cooperative: tells everything at once"),
    # unseen: scripted users with different behaviour mixes
    _scripted("scripted-terse", "unseen", "terse", "fragments and typos, discloses little"),
    _scripted("scripted-private", "unseen", "private", "declines private facts until given a reason"),
    _scripted("scripted-fickle", "unseen", "fickle", "changes their mind, sometimes twice"),
    _scripted("scripted-impatient", "unseen", "impatient", "emotional, leaves after a few messages"),
    _scripted("scripted-withholding", "unseen", "withholding", "leaves questions unanswered"),
    _scripted("scripted-skeptic", "unseen", "skeptic", "pushes back, asks why, bargains hard"),
    _scripted("scripted-emotional", "unseen", "emotional", "chatty and emotional"),
    _scripted("scripted-vague", "unseen", "vague", "vague, volunteers nothing"),
    _scripted("scripted-hard-bargainer", "unseen", "hard_bargainer", "private, tough negotiator"),
    _scripted("scripted-chaotic", "unseen", "chaotic", "a bit of everything at once"),
    # unseen: prompted-LLM users with different personas
    PanelMember("prompted-busy-parent", "unseen", "prompted:busy_parent", PERSONAS["busy_parent"]),
    PanelMember(
        "prompted-skeptical-retiree", "unseen", "prompted:skeptical_retiree", PERSONAS["skeptical_retiree"]
    ),
    PanelMember(
        "prompted-distracted-student", "unseen", "prompted:distracted_student", PERSONAS["distracted_student"]
    ),
    PanelMember(
        "prompted-anxious-first-timer",
        "unseen",
        "prompted:anxious_first_timer",
        PERSONAS["anxious_first_timer"],
    ),
    # unseen: learned simulators from other seeds or data (stage sim_panel@<key>)
    PanelMember(
        "mimesis-simulator-seed1",
        "unseen",
        "learned:models:/mimesis-simulator-seed1@candidate",
        "a MIMESIS simulator trained with another seed",
        folder="models/simulator/panel/seed1",
        stage="sim_panel@seed1",
    ),
    PanelMember(
        "mimesis-simulator-heldout",
        "unseen",
        "learned:models:/mimesis-simulator-heldout@candidate",
        "a MIMESIS simulator trained on held-out conversations (the val split)",
        folder="models/simulator/panel/heldout",
        stage="sim_panel@heldout",
    ),
    PanelMember(
        "mimesis-simulator-casino",
        "unseen",
        "learned:models:/mimesis-simulator-casino@candidate",
        "a MIMESIS simulator trained on CaSiNo negotiations (when ../shared/data/casino exists)",
        folder="models/simulator/panel/casino",
        stage="sim_panel@casino",
        optional=True,
    ),
)

SKIPPED = "skipped.json"  # written by sim_panel in place of a simulator when an optional member is skipped


@dataclass(frozen=True)
class MemberStatus:
    """Whether a member can be built now, and how (`state`: built | missing | skipped)."""

    name: str
    state: Literal["built", "missing", "skipped"]
    detail: str
    spec: str  # the spec to build it with now (a learned member's local folder when present)

    @property
    def built(self) -> bool:
        return self.state == "built"


class PanelError(ValueError):
    """The panel breaks a rule (duplicate names, training simulators among the unseen ones, …)."""


def _identity(member: PanelMember) -> str:
    """What makes two members the same simulator: the spec, or the knobs for scripted presets."""
    kind, body = split_user_spec(member.spec)
    if kind == "scripted" and body in PRESETS:
        return "scripted-knobs:" + repr(sorted(PRESETS[body].to_dict().items()))
    return member.spec


class Panel:
    """An immutable, validated set of panel members."""

    def __init__(self, members: tuple[PanelMember, ...] = DEFAULT_MEMBERS, min_unseen: int = 9) -> None:
        self.members = tuple(members)
        self.min_unseen = min_unseen
        self.validate()

    def validate(self) -> None:
        names = Counter(m.name for m in self.members)
        dupes = sorted(n for n, c in names.items() if c > 1)
        if dupes:
            raise PanelError(f"duplicate panel names: {dupes}")
        for m in self.members:
            if m.role not in ROLES:
                raise PanelError(f"{m.name}: role must be one of {ROLES}, got {m.role!r}")
            kind, body = split_user_spec(m.spec)
            if kind == "scripted" and body not in PRESETS:
                raise PanelError(f"{m.name}: unknown scripted preset {body!r}")
            if kind == "prompted" and body.split("@")[0] not in PERSONAS:
                raise PanelError(f"{m.name}: unknown persona {body!r}; known: {', '.join(PERSONAS)}")
        train = {_identity(m): m.name for m in self.by_role("train")}
        leaked = [
            f"{m.name} (same simulator as training member {train[_identity(m)]})"
            for m in self.by_role("unseen")
            if _identity(m) in train
        ]
        if leaked:
            raise PanelError(f"training simulators in the unseen set: {', '.join(leaked)}")
        if len(self.by_role("unseen")) < self.min_unseen:
            raise PanelError(
                f"the unseen set needs at least {self.min_unseen} members, has {len(self.by_role('unseen'))}"
            )

    def by_role(self, role: Role) -> list[PanelMember]:
        return [m for m in self.members if m.role == role]

    def member(self, name: str) -> PanelMember:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"no panel member {name!r}; known: {', '.join(m.name for m in self.members)}")

    def available(self, role: Role | None = None) -> list[PanelMember]:
        """Members that can be built now (scripted ones always; others once a resolver is registered)."""
        pool = self.members if role is None else self.by_role(role)
        return [m for m in pool if can_build_user(m.kind)]

    def build(self, name: str, domain: str, root: str | Path = ".") -> UserSide:
        """The UserSide of one member for one domain (a learned member from its folder when built)."""
        member = self.member(name)
        spec = member_status(member, root=root).spec if member.kind == "learned" else member.spec
        return make_user(spec, domain)

    def status(self, root: str | Path = ".", base_model: str = "models/base",
               registry: RegistryLookup | None = None) -> list[MemberStatus]:
        """Built or missing, per member (see `member_status`)."""
        return [member_status(m, root, base_model, registry) for m in self.members]


def member_status(member: PanelMember, root: str | Path = ".", base_model: str = "models/base",
                  registry: RegistryLookup | None = None) -> MemberStatus:
    """Can this member be built now? Checks files (and, given `registry`, the registry), loads nothing.

    scripted: always built. prompted: needs the base model folder (or the model after `@`; a `models:/`
    one is built only when `registry` resolves it). learned: its pipeline folder with `mimesis.json`;
    else the registry alias it names, when `registry` resolves it; else missing (the stage to run is
    named), or skipped (its stage's note says why).
    """
    root = Path(root)
    kind, body = split_user_spec(member.spec)
    if kind == "scripted":
        return MemberStatus(member.name, "built", "scripted (pure Python)", member.spec)
    if kind == "prompted":
        model = body.partition("@")[2] or base_model
        if model.startswith("models:/"):
            version = registry(model) if registry else None
            if version:
                return MemberStatus(member.name, "built", f"prompted over {model} (v{version})", member.spec)
            return MemberStatus(member.name, "missing", f"{model} does not resolve", member.spec)
        if (root / model / "config.json").exists():
            return MemberStatus(member.name, "built", f"prompted over {model}", member.spec)
        return MemberStatus(member.name, "missing", f"needs {model} (run: dvc repro base_model)", member.spec)
    folder = root / member.folder if member.folder else None
    if folder is not None and (folder / "mimesis.json").exists():
        return MemberStatus(member.name, "built", f"folder {member.folder}", f"learned:{folder}")
    if folder is not None and (folder / SKIPPED).exists():
        try:
            why = json.loads((folder / SKIPPED).read_text()).get("reason", "no reason recorded")
        except (OSError, ValueError) as exc:
            why = f"unreadable {folder / SKIPPED}: {exc}"
        return MemberStatus(member.name, "skipped", f"skipped by {member.stage}: {why}", member.spec)
    version = registry(body) if registry else None
    if version:
        return MemberStatus(member.name, "built", f"registered {body} (v{version})", member.spec)
    how = f"run: dvc repro {member.stage}" if member.stage else "no stage builds it"
    return MemberStatus(member.name, "missing", f"not built ({how})", member.spec)


def default_panel() -> Panel:
    return Panel()
