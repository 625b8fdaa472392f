"""Playing the environment part of `sim_eval`: each simulator as the user side of the eight task domains.

The fidelity part asks "does it talk like real users?"; this part asks "can an agent learn about
users from it?". The domain's competent scripted agent (`mimesis_rl.envs` scripted agents) plays
N seeded dialogues per domain against every simulator, through `run_rollouts` with the simulator
itself (the same `UserSimulator` object the fidelity part measured) as the user side, and against
the cooperative scripted user as the reference. Every simulator meets the same seeds, so the same
goal cards. Per simulator and domain:

- success rate and mean reward, and their ratio to the reference (the scripted agent succeeds
  against the cooperative scripted user; a simulator that states its goal should let it);
- goal-slot contradictions per user turn (`simulator.consistency.goal_contradictions`: the user
  states a value of one of its goal slots that its card does not hold);
- turns until the want is first stated (`environment_metrics.want_stated`) and the share of dialogues
  where it never is;
- verbatim repetition: runs of one message repeated three times in a row;
- decisions inside the dialogues (`eval.decisions.dialogue_decisions`): on every proposal the card
  user would answer, does the simulator's reply agree with the card, and where the card accepts, does
  it say yes (or neither yes nor no, which the environment reads as no);
- the share of user turns that carry private reasoning;
- role breaks (re-sampled outputs per user turn) and dialogues ended by an invalid turn.

It is a measurement: nothing here fails on the numbers; they go to the report and MLflow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from mimesis_rl.eval.environment_metrics import (
    REFERENCE,
    DialogueMeasure,
    EnvironmentRun,
    add_ratios,
    aggregate,
    measure_dialogue,
    stats_delta,
)
from mimesis_rl.eval.environment_report import fmt_rate
from mimesis_rl.eval.environment_settings import EnvironmentSettings

log = logging.getLogger(__name__)


def _counts(simulator: Any) -> dict[str, float]:
    stats = getattr(simulator, "stats", None)
    if stats is None:
        return {}
    return {
        "total": float(stats.total),
        "turns": float(stats.turns),
        "clean": float(stats.clean),
        "role_breaks": float(sum(stats.role_breaks.values())),
        "failed": float(sum(stats.failed.values())),
        "repeats": float(stats.repeats),
        "contradicting": float(stats.contradicting),
        "delivered": float(getattr(stats, "delivered", 0)),
        "closed_at_budget": float(getattr(stats, "closed_at_budget", 0)),
    }


def play_side(name: str, user_for: Any, settings: EnvironmentSettings, run: EnvironmentRun) -> None:
    """Every domain's dialogues of one user side. `batch: all`: one lockstep `run_rollouts` over all
    domains (widest batches, cheapest; re-sampling counts then exist per simulator only);
    `batch: domain`: one per domain (re-sampling counts per domain). `user_for(domain)` gives the
    user side (the same simulator object for every domain)."""
    from mimesis_rl.envs.multi import MultiDomainEnv, PerDomainAgent
    from mimesis_rl.envs.registry import make_env, scripted_agent
    from mimesis_rl.eval.decisions import dialogue_decisions
    from mimesis_rl.rollout import run_rollouts

    domains = settings.domain_names()
    groups = [domains] if settings.batch == "all" else [[d] for d in domains]
    rows: dict[str, dict[str, Any]] = {}
    everything: list[DialogueMeasure] = []
    played: list[dict[str, Any]] = []
    start = time.perf_counter()
    stats_rows: list[tuple[list[str], dict[str, float | None]]] = []
    for group in groups:
        user = user_for(group[0])
        plan = [(d, seed) for d in group for seed in settings.seeds]
        sides = [user_for(d) for d, _ in plan]
        plan_users: Any = user if all(u is user for u in sides) else sides  # one side, or one per dialogue
        before = _counts(user)
        envs = {d: make_env(d, max_turns=settings.max_turns) for d in group}
        agents = {d: scripted_agent(d, settings.agent) for d in group}
        result = run_rollouts(
            MultiDomainEnv(envs, plan, name="all-domains", description="the built-in domains, one batch"),
            PerDomainAgent(agents, f"scripted:{settings.agent}"),
            plan_users,
            list(range(len(plan))),
            progress=False,
            desc=f"{name} env",
        )
        after = _counts(user)
        if before or after:
            stats_rows.append((group, stats_delta(before, after)))
        records = result.records()
        played += records
        for domain in group:
            picked = [i for i, state in enumerate(result.states) if state.domain == domain]
            measures = [measure_dialogue(result.states[i], settings.repeat_run) for i in picked]
            everything += measures
            row = aggregate(measures)
            if len(group) == 1 and stats_rows and stats_rows[-1][0] == group:
                row.update(stats_rows[-1][1])
            rows[domain] = row
            if settings.transcripts:
                run.transcripts += [{"simulator": name, **records[i], "env": domain} for i in picked]
            log.info(
                "env %s × %s: success %s, reward %.3f, contradictions/turn %s, %d user turns",
                name,
                domain,
                fmt_rate(row["success_rate"]),
                row["mean_reward"] or 0.0,
                fmt_rate(row["contradiction_rate"]),
                row["user_turns"],
            )
    decisions = dialogue_decisions(played)
    for domain, rates in decisions["rates_by_domain"].items():
        rows[domain].update(_decision_keys(rates))
    run.rows[name] = rows
    run.decisions[name] = decisions
    overall = {**aggregate(everything), **_decision_keys(decisions)}
    if stats_rows:
        weights = [float(sum(rows[d]["user_turns"] for d in g)) for g, _ in stats_rows]
        for key in ("role_break_rate", "repeat_resample_rate", "contradiction_resample_rate",
                    "failed_turn_rate", "clean_rate", "closed_at_budget_share"):
            overall[key] = _weighted([delta.get(key) for _, delta in stats_rows], weights)
        overall["samples"] = sum(delta.get("samples") or 0.0 for _, delta in stats_rows)
    run.overall[name] = overall
    run.seconds[name] = round(time.perf_counter() - start, 3)


def _decision_keys(rates: Mapping[str, Any]) -> dict[str, Any]:
    """A row's columns from `decision_rates`."""
    return {"card_decisions": rates["proposals"], "card_agreement": rates["agreement"],
            "card_yes_rate": rates["accepted_when_card_accepts"],
            "card_neither_rate": rates["neither_when_card_accepts"],
            "card_false_yes_rate": rates["accepted_when_card_declines"]}


def _weighted(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None and w]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def run_environment(simulators: Mapping[str, Any], settings: EnvironmentSettings) -> EnvironmentRun:
    """The reference row and one row per simulator, per domain (same seeds everywhere)."""
    from mimesis_rl.envs.specs import make_user

    unknown = sorted(set(settings.simulators or ()) - set(simulators))
    if unknown:
        raise ValueError(
            f"sim_eval.environment.simulators: {unknown} are not in sim_eval.simulators "
            f"({', '.join(simulators)})"
        )
    run = EnvironmentRun(
        settings={
            "domains": settings.domain_names(),
            "seeds": settings.seeds,
            "max_turns": settings.max_turns,
            "agent": settings.agent,
            "reference": settings.reference,
        }
    )
    references = {domain: make_user(settings.reference, domain) for domain in settings.domain_names()}
    play_side(REFERENCE, references.__getitem__, settings, run)
    for name, simulator in simulators.items():
        if settings.simulators is not None and name not in settings.simulators:
            continue
        if name == REFERENCE:
            raise ValueError(
                f"sim_eval: a simulator may not be named {REFERENCE!r} (the scripted reference row)"
            )
        play_side(name, lambda domain, s=simulator: s, settings, run)
        log.info(
            "env %s: %d dialogues in %.1f s (%.2f s per dialogue)",
            name,
            settings.dialogues * len(settings.domain_names()),
            run.seconds[name],
            run.seconds[name] / max(1, settings.dialogues * len(settings.domain_names())),
        )
    add_ratios(run)
    return run
