"""How a training stage registers what it made: a stage's `registry:` block as typed settings.

Why: four stages (sim_sft, sim_rl, sim_panel, agent_sft, agent_rl) register a model folder, and each
read the same five keys out of a raw dict with its own defaults. Here they are read once, through the
one settings loader (an unknown key names the file and the key path).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mimesis_rl.settings import from_section

BUNDLE_CHOICES = ("auto", "always", "never", True, False)


def bundle_choice(bundle: str | bool) -> str:
    """`auto`, `always` or `never` (true/false = always/never); anything else is an error naming it."""
    if bundle not in BUNDLE_CHOICES:
        raise ValueError(f"registry.bundle_base {bundle!r}: expected auto | always | never or true/false")
    return {True: "always", False: "never"}.get(bundle, bundle)  # type: ignore[call-overload]


@dataclass(frozen=True)
class RegistrySettings:
    """register: false skips registration; name: the registered model (None = the stage's own);
    alias: set on the new version; bundle_base: copy the base into the version (`auto` = when it is
    at most `max_bundle_mb`; true/false = always/never)."""

    register: bool = True
    name: str | None = None
    alias: str = "candidate"
    bundle_base: bool | str = "auto"
    max_bundle_mb: float = 200.0

    def __post_init__(self) -> None:
        bundle_choice(self.bundle_base)
        object.__setattr__(self, "max_bundle_mb", float(self.max_bundle_mb))

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None, where: str) -> RegistrySettings:
        return from_section(cls, section, where)
