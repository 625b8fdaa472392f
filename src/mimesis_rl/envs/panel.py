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
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from mimesis_rl.envs.base import UserSide
from mimesis_rl.envs.scripted.knobs import PRESETS
from mimesis_rl.envs.specs import can_build_user, make_user, split_user_spec

Role = Literal["train", "unseen", "baseline"]
ROLES: tuple[Role, ...] = ("train", "unseen", "baseline")

# Personas for prompted-LLM users (the resolver turns one into a system prompt with the goal card).
PERSONAS: dict[str, str] = {
    "assistant": "You are a helpful assistant. Play the user in this conversation.",
    "busy_parent": (
        "A parent of three with five minutes to spare: short messages, interrupts, mentions the "
        "kids, wants it sorted now, leaves if it drags."
    ),
    "skeptical_retiree": (
        "A retired engineer who distrusts sales talk: asks why, checks claims, pushes "
        "back, keeps personal details to himself, polite but firm."
    ),
    "distracted_student": (
        "A student texting between classes: fragments, typos, changes topics, unsure what "
        "they want, easily swayed, forgets to answer questions."
    ),
    "anxious_first_timer": (
        "Someone doing this for the first time: worried about mistakes, over-explains, "
        "asks many follow-up questions, needs reassurance."
    ),
}


@dataclass(frozen=True)
class PanelMember:
    """One simulator of the panel."""

    name: str
    role: Role
    spec: str
    description: str

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
    # unseen: learned simulators from other seeds or data
    PanelMember(
        "mimesis-simulator-seed1",
        "unseen",
        "learned:models:/mimesis-simulator-seed1@candidate",
        "a MIMESIS simulator trained with another seed",
    ),
    PanelMember(
        "mimesis-simulator-heldout",
        "unseen",
        "learned:models:/mimesis-simulator-heldout@candidate",
        "a MIMESIS simulator trained on held-out conversations",
    ),
)


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

    def build(self, name: str, domain: str) -> UserSide:
        """The UserSide of one member for one domain."""
        return make_user(self.member(name).spec, domain)


def default_panel() -> Panel:
    return Panel()
