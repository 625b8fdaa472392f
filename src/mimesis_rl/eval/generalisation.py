"""The generalisation matrix: every agent variant x every unseen panel member x every environment.

Why paired: every agent meets the same dialogues — the same (environment, seed) goal cards, and the
same user randomness (scripted users seed their generator from (name, domain, seed); LM users key
sampling by (domain, episode seed, turn)) — so a difference between two agents is measured on
matched pairs and its bootstrap interval resamples pairs, not two independent samples.

One agent plays all its dialogues in one lockstep rollout (`rollout.run_rollouts`): the environments
are routed by `MultiEnv`, the users by `MixedUsers`, so each round is one batched generate for the
agent and one per LM user, whatever the number of cells.

Per dialogue it records success and reward, and the behaviour the paper cares about: agent turns to
success, clarifying questions (agent messages that ask something and take no action), and actions
taken before the user's hidden preference was known (the goal card's `private` slots; a slot counts
as known from the first user message that states its value — lexical match, see `disclosed`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mimesis_rl.envs.base import AgentSide, EpisodeState, UserSide
from mimesis_rl.envs.core import TaskEnv
from mimesis_rl.envs.multi import MultiDomainEnv, PerDomainAgent

log = logging.getLogger(__name__)

METRICS = ("success", "reward")


# -- settings ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentVariant:
    """One trained agent: `spec` is an agent spec (`scripted`, a model folder, `models:/…`)."""

    name: str
    spec: str
    trained_on: str = ""  # the training user, for the report (assistant | mimesis | none)


@dataclass(frozen=True)
class Comparison:
    """`a` minus `b` on every unseen simulator (e.g. MIMESIS-trained minus assistant-trained)."""

    name: str
    a: str
    b: str
    title: str = ""


@dataclass(frozen=True)
class GeneralisationSettings:
    """`agent_eval:` in params.yaml.

    Matrix:
        agents: the variants (name, spec, trained_on); members: unseen panel members (null = all);
        envs: environments (null = all 8); dialogues_per_cell: N dialogues per (agent, member, env),
        seeds first_seed .. first_seed+N-1 for every agent and member (paired).
        max_turns: agent-turn limit override (null = each domain's own).
    Decoding:
        agent_max_new_tokens, user_max_new_tokens (a learned user's own setting is capped by it),
        user_max_context_tokens, sampling_seed (mixed into LM sampling seeds), batch_dialogues
        (dialogues played in one lockstep rollout: bounds the KV caches held at once).
    Statistics:
        bootstrap: resamples; confidence: interval level; metric: what the comparisons rank
        (success | reward).
    Missing inputs:
        on_missing: `skip` (recorded in the report, the claims say "not measured") or `fail`.
    """

    agents: tuple[AgentVariant, ...] = ()
    members: tuple[str, ...] | None = None
    envs: tuple[str, ...] | None = None
    dialogues_per_cell: int = 4
    first_seed: int = 10_000
    max_turns: int | None = None
    agent_max_new_tokens: int = 96
    user_max_new_tokens: int = 64
    user_max_context_tokens: int | None = 512
    sampling_seed: int = 0
    bootstrap: int = 2000
    confidence: float = 0.95
    metric: str = "success"
    on_missing: str = "skip"
    base_model: str = "models/base"
    report_dir: str = "reports/agent_eval"
    comparisons: tuple[Comparison, ...] = ()
    write_transcripts: bool = True
    batch_dialogues: int | None = 48

    def __post_init__(self) -> None:
        if self.dialogues_per_cell < 1:
            raise ValueError(f"agent_eval.dialogues_per_cell must be >= 1, got {self.dialogues_per_cell}")
        if self.metric not in METRICS:
            raise ValueError(f"agent_eval.metric: {self.metric!r} is not one of {METRICS}")
        if self.on_missing not in ("skip", "fail"):
            raise ValueError(f"agent_eval.on_missing: {self.on_missing!r} is not skip or fail")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"agent_eval.confidence must be in [0.5, 1), got {self.confidence}")
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names):
            raise ValueError(f"agent_eval.agents: duplicate names in {names}")

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> GeneralisationSettings:
        section = dict(section or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"params.yaml agent_eval: unknown keys {unknown}; known: {sorted(known)}")
        agents = []
        for i, entry in enumerate(section.pop("agents", None) or []):
            if not isinstance(entry, Mapping) or "name" not in entry or "spec" not in entry:
                raise ValueError(f"params.yaml agent_eval.agents[{i}]: needs `name` and `spec`, "
                                 f"got {entry!r}")
            agents.append(AgentVariant(str(entry["name"]), str(entry["spec"]),
                                       str(entry.get("trained_on", ""))))
        comparisons = []
        for name, entry in (section.pop("comparisons", None) or {}).items():
            if not isinstance(entry, Mapping) or "a" not in entry or "b" not in entry:
                raise ValueError(f"params.yaml agent_eval.comparisons.{name}: needs `a` and `b`, "
                                 f"got {entry!r}")
            comparisons.append(Comparison(str(name), str(entry["a"]), str(entry["b"]),
                                          str(entry.get("title", ""))))
        for key in ("members", "envs"):
            if section.get(key) is not None:
                section[key] = tuple(section[key])
        return cls(agents=tuple(agents), comparisons=tuple(comparisons), **section)


def cell_seeds(settings: GeneralisationSettings) -> list[int]:
    """The seeds of every cell: the same for every agent, member and environment (paired)."""
    return list(range(settings.first_seed, settings.first_seed + settings.dialogues_per_cell))


# -- routing many environments and users through one rollout -------------------------------------


# -- behaviour read from a finished episode ------------------------------------------------------

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


# -- statistics ----------------------------------------------------------------------------------


def bootstrap_mean(values: Sequence[float], n_boot: int, confidence: float, seed: int = 0) -> list[float]:
    """Percentile interval of the mean (resampling the values)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return [math.nan, math.nan]
    if len(x) == 1 or np.all(x == x[0]):
        return [float(x.mean()), float(x.mean())]
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return [float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))]


def paired_difference(a: Mapping[Any, float], b: Mapping[Any, float], n_boot: int, confidence: float,
                      seed: int = 0, strata: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """Mean of a[k] - b[k] over the keys both have, with a paired bootstrap interval.

    With `strata`, the statistic is the mean over strata of each stratum's mean difference and
    the bootstrap resamples pairs within each stratum (every unseen simulator weighs the same).
    """
    keys = sorted(set(a) & set(b), key=repr)
    if not keys:
        return {"diff": None, "ci": None, "pairs": 0}
    groups: dict[Any, list[float]] = defaultdict(list)
    for k in keys:
        groups[strata(k) if strata else 0].append(float(a[k]) - float(b[k]))
    arrays = [np.asarray(v) for v in groups.values()]
    point = float(np.mean([d.mean() for d in arrays]))
    rng = np.random.default_rng(seed)
    boots = np.zeros(n_boot)
    for d in arrays:
        boots += d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    boots /= len(arrays)
    alpha = (1 - confidence) / 2
    ci = [float(np.quantile(boots, alpha)), float(np.quantile(boots, 1 - alpha))]
    return {"diff": point, "ci": ci, "pairs": len(keys)}


def interval_verdict(ci: Sequence[float] | None, higher_is_better: bool = True) -> str:
    """`holds` when the whole interval is on the good side of 0, `does not hold` when it is wholly on
    the bad side, `within noise` when it contains 0 (and `not measured` without an interval)."""
    if ci is None or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in ci):
        return "not measured"
    lo, hi = (ci[0], ci[1]) if higher_is_better else (-ci[1], -ci[0])
    if lo > 0:
        return "holds"
    if hi < 0:
        return "does not hold"
    return "within noise"


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


# -- playing the matrix --------------------------------------------------------------------------


@dataclass
class Played:
    """The raw rows of one agent, its transcripts and what it cost."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    agent_turns: int = 0
    user_turns: int = 0


def play_agent(agent: AgentSide, agent_name: str, users: Mapping[str, Mapping[str, UserSide]],
               envs: Mapping[str, TaskEnv], seeds: Sequence[int], progress: bool = True,
               batch_dialogues: int | None = None) -> Played:
    """All dialogues of one agent (every member x env x seed) in lockstep rollouts of at most
    `batch_dialogues` dialogues each (None = one rollout), environment by environment so a batch
    holds prompts of similar length. Rows come back in (member, env, seed) order."""
    from mimesis_rl.rollout import run_rollouts

    jobs = [(m, e, s) for e in envs for m in users for s in seeds]
    size = batch_dialogues or len(jobs)
    played = Played()
    out: dict[tuple[str, str, int], tuple[dict[str, Any], dict[str, Any]]] = {}
    for lo in range(0, len(jobs), size):
        chunk = jobs[lo:lo + size]
        multi = MultiDomainEnv(envs, [(env, seed, member) for member, env, seed in chunk], name="panel",
                               description="every environment of the generalisation matrix")
        sides = [users[m][e] for m, e, _ in chunk]
        start = time.perf_counter()
        result = run_rollouts(multi, agent, sides, list(range(len(chunk))),  # type: ignore[arg-type]
                              progress=progress,
                              desc=f"agent_eval {agent_name} {lo + len(chunk)}/{len(jobs)}")
        played.seconds += time.perf_counter() - start
        played.agent_turns += result.agent_turns
        played.user_turns += result.user_turns
        for job, state, record in zip(chunk, result.states, result.records(), strict=True):
            record.update({"agent": agent_name, "member": job[0]})
            out[job] = (dialogue_row(state, agent_name, job[0]), record)
    for job in [(m, e, s) for m in users for e in envs for s in seeds]:
        played.rows.append(out[job][0])
        played.records.append(out[job][1])
    return played


# -- building the parties ------------------------------------------------------------------------


def agent_problem(spec: str, root: Path = Path(".")) -> str | None:
    """Why an agent spec cannot be played here (None = it can): a missing folder, mostly."""
    if spec == "scripted" or spec.startswith("scripted:"):
        return None
    body = spec.split(":", 1)[1] if spec.startswith("model:") else spec
    if body.startswith(("models:/", "runs:/")):
        return None
    folder = root / body
    if not folder.is_dir():
        return f"{body} does not exist (has its stage run?)"
    if not any((folder / m).exists() for m in ("mimesis.json", "adapter_config.json", "config.json")):
        return f"{body} is not a model folder (no mimesis.json, adapter_config.json or config.json)"
    return None


def trained_against(spec: str, root: Path = Path(".")) -> list[str]:
    """Every string an agent folder's manifest records (where it says what it trained against)."""
    import json

    body = spec.split(":", 1)[1] if spec.startswith("model:") else spec
    manifest = root / body / "mimesis.json"
    if not manifest.exists():
        return []
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)

    walk(json.loads(manifest.read_text()).get("extra", {}))
    return out


def build_agent(variant: AgentVariant, envs: Sequence[str], pool: Any, settings: GeneralisationSettings,
                base: Path) -> AgentSide:
    """A scripted agent (per domain) or a `ModelAgent` on the shared pool, greedy."""
    from mimesis_rl.envs.specs import make_agent, split_agent_spec

    kind, body = split_agent_spec(variant.spec)
    if kind == "scripted":
        return PerDomainAgent({e: make_agent(variant.spec, e) for e in envs}, variant.name)
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.inference.sources import resolve_source
    from mimesis_rl.rollout import ModelAgent

    sampling = SamplingParams(max_new_tokens=settings.agent_max_new_tokens, do_sample=False)
    runner = pool.runner(resolve_source(body, base), sampling, seed=settings.sampling_seed)
    return ModelAgent(runner, name=variant.name)


def build_users(members: Sequence[tuple[str, str]], envs: Sequence[str], pool: Any,
                settings: GeneralisationSettings, base: Path) -> dict[str, dict[str, UserSide]]:
    """member -> env -> user side. One `UserSimulator` per LM member serves every environment."""
    from mimesis_rl.envs.personas import PERSONAS
    from mimesis_rl.envs.specs import make_user, split_user_spec
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.inference.sources import resolve_source
    from mimesis_rl.simulator.api import UserSimulator

    out: dict[str, dict[str, UserSide]] = {}
    ctx = settings.user_max_context_tokens
    for name, spec in members:
        kind, body = split_user_spec(spec)
        if kind == "scripted":
            out[name] = {e: make_user(spec, e) for e in envs}
            continue
        if kind == "prompted":
            persona, _, model = body.partition("@")
            model_base = Path(resolve_source(model, base).base) if model else base
            sampling = SamplingParams(max_new_tokens=settings.user_max_new_tokens, do_sample=True,
                                      temperature=0.8, top_p=0.95, max_retries=1)
            user: UserSide = UserSimulator.assistant(model_base, name=name, sampling=sampling, pool=pool,
                                                     seed=settings.sampling_seed,
                                                     persona={"persona": PERSONAS[persona]},
                                                     max_context_tokens=ctx)
        else:
            own = resolve_source(body, base).sampling
            sampling = None
            if own is not None and own.max_new_tokens > settings.user_max_new_tokens:
                sampling = dataclasses.replace(own, max_new_tokens=settings.user_max_new_tokens)
            user = UserSimulator.load(body, name=name, base_model=base, pool=pool, sampling=sampling,
                                      seed=settings.sampling_seed, max_context_tokens=ctx)
        out[name] = dict.fromkeys(envs, user)
    return out


# -- the report ----------------------------------------------------------------------------------


def heatmap(result: Mapping[str, Any], agent: str, path: str | Path, metric: str = "success_rate") -> Path:
    """Members x environments for one agent (success rate by default), numbers in the cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mimesis_rl.fsutil import atomic_open

    members, envs = result["members"], result["envs"]
    grid = np.full((len(members), len(envs)), np.nan)
    for cell in result["cells"]:
        if cell["agent"] == agent and cell[metric] is not None:
            grid[members.index(cell["member"]), envs.index(cell["env"])] = cell[metric]
    fig, ax = plt.subplots(figsize=(1.1 * len(envs) + 3, 0.38 * len(members) + 1.6))
    image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(envs)), envs, rotation=30, ha="right")
    ax.set_yticks(range(len(members)), members)
    for i in range(len(members)):
        for j in range(len(envs)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if grid[i, j] < 0.5 else "black")
    n = result["settings"]["dialogues_per_cell"]
    ax.set_title(f"{agent}: {metric.replace('_', ' ')} on unseen simulators ({n} dialogue(s) per cell)")
    fig.colorbar(image, ax=ax, fraction=0.03)
    fig.tight_layout()
    path = Path(path)
    with atomic_open(path, "wb", encoding=None) as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)
    return path


def _fmt(value: float | None, ci: Sequence[float] | None = None, digits: int = 2) -> str:
    if value is None:
        return "–"
    text = f"{value:+.{digits}f}" if ci is not None and value < 0 else f"{value:.{digits}f}"
    if ci is not None and not any(math.isnan(c) for c in ci):
        text += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return text


def markdown(result: Mapping[str, Any]) -> str:
    """The generalisation report in words and tables."""
    s = result["settings"]
    lines = [
        "# Agent generalisation to unseen simulators",
        "",
        f"{len(result['agents'])} agent(s) x {len(result['members'])} unseen simulator(s) x "
        f"{len(result['envs'])} environment(s), {s['dialogues_per_cell']} dialogue(s) per cell, seeds "
        f"{result['seeds'][0]}..{result['seeds'][-1]} for every agent (paired). Brackets: "
        f"{int(s['confidence'] * 100)}% bootstrap intervals ({s['bootstrap']} resamples; differences "
        "resample matched dialogue pairs).",
        "",
    ]
    for miss in result.get("missing_agents", []):
        lines.append(f"- agent **{miss['name']}** not evaluated: {miss['reason']}")
    for miss in result.get("skipped_members", []):
        lines.append(f"- simulator **{miss['name']}** not in the matrix: {miss['reason']}")
    if result.get("missing_agents") or result.get("skipped_members"):
        lines.append("")
    lines += ["## Per agent (all unseen simulators)", "",
              "| Agent | trained on | success | reward | turns to success | clarifying q. | "
              "actions before private known | acted before known |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for a in result["agents"]:
        p = result["per_agent"][a]
        b = p["behaviour"]
        lines.append(f"| {a} | {result['trained_on'].get(a, '')} | "
                     f"{_fmt(p['success_rate'], p['success_ci'])} | "
                     f"{_fmt(p['mean_reward'], p['reward_ci'])} | {_fmt(b['turns_to_success'])} | "
                     f"{_fmt(b['clarifying_questions'])} | {_fmt(b['actions_before_private_known'])} | "
                     f"{_fmt(b['acted_before_private_known_rate'])} |")
    lines += ["", "## Success rate per unseen simulator", "",
              "| Simulator | " + " | ".join(result["agents"]) + " |",
              "|---|" + "---:|" * len(result["agents"])]
    per = {(r["agent"], r["member"]): r for r in result["per_member"]}
    for m in result["members"]:
        lines.append(f"| {m} | " + " | ".join(
            _fmt(per[(a, m)]["success_rate"], per[(a, m)]["success_ci"]) for a in result["agents"]) + " |")
    for comp in result["comparisons"].values():
        title = comp.get("title") or f"{comp['a']} − {comp['b']}"
        lines += ["", f"## {title}", ""]
        if not comp["measured"]:
            lines.append(f"Not measured: {', '.join(comp['missing'])} not evaluated.")
            continue
        o = comp["overall"]
        lines += [f"{comp['a']} better on **{comp['better']} of {comp['of']}** unseen simulators "
                  f"({comp['better_clear']} with the interval above 0, {comp['worse_clear']} below). "
                  f"Mean over simulators of the paired difference in {comp['metric']}: "
                  f"{_fmt(o['diff'], o['ci'], 3)} — {o['verdict']}.", "",
                  f"| Simulator | {comp['a']} − {comp['b']} ({comp['metric']}) | verdict |", "|---|---:|---|"]
        for r in comp["per_member"]:
            lines.append(f"| {r['member']} | {_fmt(r['diff'], r['ci'], 3)} | {r['verdict']} |")
    c = result["cost"]
    lines += ["", "## Cost", "",
              f"{c['dialogues']} dialogues in {c['seconds']:.0f} s ({c['seconds_per_dialogue']:.2f} s per "
              f"dialogue; {c['cpu']}, load {c['load']})."]
    maps = ", ".join(f"`{Path(p).name}`" for p in result.get("heatmaps", {}).values())
    lines += ["", f"Heatmaps: {maps}", ""]
    return "\n".join(lines)
