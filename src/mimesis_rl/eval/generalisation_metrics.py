"""What the generalisation matrix measures, as functions of finished dialogues and their rows.

Per dialogue (`dialogue_row`): success and reward, and the behaviour the paper cares about: agent
turns to success, clarifying questions (agent messages that ask something and take no action), and
actions taken before the user's hidden preference was known (the goal card's `private` slots; a slot
counts as known from the first user message that states its value — lexical match, see `disclosed`).

Over rows (`analyse`): per cell, per unseen simulator and per agent, success rate and mean reward
with bootstrap intervals, and the paired comparisons between agents (`stats.paired_difference`:
every agent met the same dialogues, so differences are measured on matched pairs).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mimesis_rl.envs.protocols import EpisodeState
from mimesis_rl.eval.generalisation_settings import GeneralisationSettings
from mimesis_rl.stats import bootstrap_mean, interval_verdict, paired_difference

_ACTION_RE = re.compile(r"<action>.*?(</action>|$)", re.DOTALL | re.IGNORECASE)


def _value_forms(domain: str, slot: str, value: Any, slots: Mapping[str, Any]) -> list[str]:
    """Phrases that state a private slot's value (the value itself, and the domain's words for it)."""
    forms: list[str] = []
    if isinstance(value, bool) or value is None:
        return forms
    if isinstance(value, int | float):
        forms.append(str(round(value)))
    elif isinstance(value, str):
        forms.append(value.replace("_", " "))
        if domain == "returns":
            from mimesis_rl.envs.domains import returns

            forms += [getattr(returns, "CONDITION_TEXT", {}).get(value, ""),
                      getattr(returns, "REASON_TEXT", {}).get(value, "")]
        reasons = slots.get("reasons")
        if isinstance(reasons, Mapping) and isinstance(reasons.get(value), str):
            forms.append(reasons[value])  # campsite: "we have kids who drink a lot" states the priority
    return [f.strip().rstrip(".").lower() for f in forms if f and f.strip()]


def disclosed(text: str, domain: str, slot: str, value: Any, slots: Mapping[str, Any]) -> bool:
    """Does a user message state the private slot's value? (whole words; numbers not inside others)"""
    low = text.lower()
    for form in _value_forms(domain, slot, value, slots):
        if form.isdigit():
            if re.search(rf"(?<![\d.]){form}(?![\d])", low):
                return True
        elif re.search(rf"(?<![a-z0-9]){re.escape(form)}s?(?![a-z0-9])", low):
            return True
    return False


def private_known_at(state: EpisodeState) -> int | None:
    """Agent turns taken before every private slot was known (0 = known from the opening); None = never
    known. Slots are read from the goal the user started with (before any change of mind)."""
    goal = state.hidden.get("original_goal") or state.goal.model_dump()
    private = [s for s in goal.get("private", []) if s in goal.get("slots", {})]
    if not private:
        return None
    known: dict[str, int] = {}
    agent_turns = 0
    for turn in state.trace:
        if turn.role == "assistant":
            agent_turns += 1
        elif turn.role == "user":
            for slot in private:
                if slot not in known and disclosed(turn.content, state.domain, slot, goal["slots"][slot],
                                                   goal["slots"]):
                    known[slot] = agent_turns
    return max(known.values()) if len(known) == len(private) else None


def clarifying_questions(state: EpisodeState) -> int:
    """Agent messages without an action whose text asks something."""
    n = 0
    for turn in state.trace:
        plain = turn.role == "assistant" and "action" not in turn.meta and "error" not in turn.meta
        if plain and "?" in _ACTION_RE.sub("", turn.content):
            n += 1
    return n


def dialogue_row(state: EpisodeState, agent: str, member: str) -> dict[str, Any]:
    """The numbers of one finished dialogue (one row of the matrix's raw data)."""
    verdict = state.verdict
    goal = state.hidden.get("original_goal") or state.goal.model_dump()
    has_private = bool([s for s in goal.get("private", []) if s in goal.get("slots", {})])
    known_at = private_known_at(state)
    before = None
    if has_private:
        limit = math.inf if known_at is None else known_at
        before = sum(1 for a in state.actions if a.get("turn", 0) <= limit)
    success = bool(verdict and verdict.success)
    return {
        "agent": agent,
        "member": member,
        "env": state.domain,
        "seed": state.seed,
        "success": success,
        "reward": float(verdict.reward) if verdict else 0.0,
        "agent_turns": state.agent_turns,
        "turns_to_success": state.agent_turns if success else None,
        "clarifying_questions": clarifying_questions(state),
        "actions": len(state.actions),
        "has_private": has_private,
        "private_known_at": known_at,
        "actions_before_private_known": before,
        "end_reason": state.end_reason,
        "invalid_actions": state.invalid_actions,
    }


# -- summaries over rows ------------------------------------------------------------------------


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def behaviour(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The agent behaviours of a set of dialogues."""
    private = [r for r in rows if r["has_private"]]
    return {
        "turns_to_success": _mean([r["turns_to_success"] for r in rows]),
        "clarifying_questions": _mean([r["clarifying_questions"] for r in rows]),
        "actions_before_private_known": _mean([r["actions_before_private_known"] for r in private]),
        "acted_before_private_known_rate": _mean(
            [float((r["actions_before_private_known"] or 0) > 0) for r in private]),
        "private_known_rate": _mean([float(r["private_known_at"] is not None) for r in private]),
        "dialogues_with_private": len(private),
        "mean_agent_turns": _mean([r["agent_turns"] for r in rows]),
    }


def summarise(rows: Sequence[Mapping[str, Any]], n_boot: int, confidence: float,
              seed: int = 0) -> dict[str, Any]:
    """Success rate and mean reward with bootstrap intervals, plus behaviour."""
    succ = [float(r["success"]) for r in rows]
    rew = [float(r["reward"]) for r in rows]
    return {
        "n": len(rows),
        "success_rate": _mean(succ),
        "success_ci": bootstrap_mean(succ, n_boot, confidence, seed),
        "mean_reward": _mean(rew),
        "reward_ci": bootstrap_mean(rew, n_boot, confidence, seed + 1),
        "behaviour": behaviour(rows),
    }


def analyse(rows: Sequence[Mapping[str, Any]], settings: GeneralisationSettings,
            agents: Sequence[str], members: Sequence[str], envs: Sequence[str]) -> dict[str, Any]:
    """Cells, per-member and per-agent summaries, and the paired comparisons."""
    nb, conf = settings.bootstrap, settings.confidence
    by: dict[tuple[str, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by[(r["agent"], r["member"], r["env"])].append(r)
        by[(r["agent"], r["member"])].append(r)
        by[(r["agent"],)].append(r)
    cells = [{"agent": a, "member": m, "env": e,
              **{k: v for k, v in summarise(by[(a, m, e)], nb, conf).items() if k != "behaviour"}}
             for a in agents for m in members for e in envs]
    per_member = [{"agent": a, "member": m, **summarise(by[(a, m)], nb, conf)}
                  for a in agents for m in members]
    per_agent = {a: summarise(by[(a,)], nb, conf) for a in agents}
    metric = settings.metric
    values = {a: {(r["member"], r["env"], r["seed"]): float(r[metric]) for r in by[(a,)]} for a in agents}
    comparisons: dict[str, Any] = {}
    for comp in settings.comparisons:
        if comp.a not in values or comp.b not in values:
            missing = [x for x in (comp.a, comp.b) if x not in values]
            comparisons[comp.name] = {"a": comp.a, "b": comp.b, "title": comp.title, "metric": metric,
                                      "measured": False, "missing": missing}
            continue
        rows_out = []
        for i, m in enumerate(members):
            pa = {k: v for k, v in values[comp.a].items() if k[0] == m}
            pb = {k: v for k, v in values[comp.b].items() if k[0] == m}
            d = paired_difference(pa, pb, nb, conf, seed=i)
            rows_out.append({"member": m, **d, "verdict": interval_verdict(d["ci"])})
        overall = paired_difference(values[comp.a], values[comp.b], nb, conf, seed=len(members),
                                    strata=lambda k: k[0])
        measured = [r for r in rows_out if r["diff"] is not None]
        comparisons[comp.name] = {
            "a": comp.a, "b": comp.b, "title": comp.title, "metric": metric, "measured": True,
            "per_member": rows_out,
            "overall": {**overall, "verdict": interval_verdict(overall["ci"])},
            "better": sum(1 for r in measured if r["diff"] > 0),
            "better_clear": sum(1 for r in measured if r["verdict"] == "holds"),
            "worse_clear": sum(1 for r in measured if r["verdict"] == "does not hold"),
            "of": len(measured),
        }
    return {"cells": cells, "per_member": per_member, "per_agent": per_agent, "comparisons": comparisons}
