"""Settings of the environment part of `sim_eval` (`sim_eval.environment` in params.yaml)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvironmentSettings:
    """`sim_eval.environment`: the scripted agent against each simulator in every domain.

    enabled: run this part at all. domains: which domains (null = all 8). dialogues: seeded
    dialogues per domain and simulator (the same seeds `first_seed`, `first_seed + 1`, … for all).
    max_turns: agent turns per dialogue (null = the domain's own limit); the cost is roughly
    simulators x domains x dialogues x user turns, one batched generate per domain and round.
    agent: the scripted agent policy. reference: the user side of the reference row.
    repeat_run: a message repeated this many times in a row counts as verbatim repetition.
    transcripts: write every dialogue, with its coach notes (`eval.coach_notes`; coach_horizon: later
    user turns the template coach reads for a note). batch: `all` = one lockstep batch over all
    domains (cheapest; re-sampling counts per simulator), `domain` = one batch per domain (those
    counts per domain).
    simulators: names (from `sim_eval.simulators`) to play; null = all (each one costs the same).
    """

    enabled: bool = True
    domains: list[str] | None = None
    dialogues: int = 4
    first_seed: int = 10_000
    max_turns: int | None = 6
    agent: str = "scripted"
    reference: str = "scripted:cooperative"
    repeat_run: int = 3
    transcripts: bool = True
    coach_horizon: int = 2
    batch: str = "all"
    simulators: list[str] | None = None

    def __post_init__(self) -> None:
        if self.dialogues < 1:
            raise ValueError(f"sim_eval.environment.dialogues must be >= 1, got {self.dialogues}")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"sim_eval.environment.max_turns must be >= 1 or null, got {self.max_turns}")
        if self.batch not in ("all", "domain"):
            raise ValueError(f"sim_eval.environment.batch must be `all` or `domain`, got {self.batch!r}")
        if self.repeat_run < 2:
            raise ValueError(f"sim_eval.environment.repeat_run must be >= 2, got {self.repeat_run}")
        if self.coach_horizon < 1:
            raise ValueError(f"sim_eval.environment.coach_horizon must be >= 1, got {self.coach_horizon}")
        from mimesis_rl.envs.registry import DOMAINS

        unknown = sorted(set(self.domains or ()) - set(DOMAINS))
        if unknown:
            raise ValueError(f"sim_eval.environment.domains: unknown {unknown}; known: {', '.join(DOMAINS)}")

    @property
    def seeds(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.dialogues))

    def domain_names(self) -> list[str]:
        from mimesis_rl.envs.registry import DOMAINS

        return list(self.domains or DOMAINS)
