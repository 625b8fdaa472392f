"""The environment part of `sim_eval`: each simulator as the user side of the eight task domains.

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
- turns until the want is first stated (`want_stated`) and the share of dialogues where it never is;
- verbatim repetition: runs of one message repeated three times in a row;
- the share of user turns that carry private reasoning;
- role breaks (re-sampled outputs per user turn) and dialogues ended by an invalid turn.

It is a measurement: nothing here fails on the numbers; they go to the report and MLflow.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.base import EpisodeState
from mimesis_rl.simulator.consistency import goal_contradictions
from mimesis_rl.simulator.format import normalise
from mimesis_rl.simulator.rewards.slots import mentions

log = logging.getLogger(__name__)

REFERENCE = "reference"  # the row name of the scripted cooperative user


@dataclass(frozen=True)
class EnvironmentSettings:
    """`sim_eval.environment`: the scripted agent against each simulator in every domain.

    enabled: run this part at all. domains: which domains (null = all 8). dialogues: seeded
    dialogues per domain and simulator (the same seeds `first_seed`, `first_seed + 1`, … for all).
    max_turns: agent turns per dialogue (null = the domain's own limit); the cost is roughly
    simulators x domains x dialogues x user turns, one batched generate per domain and round.
    agent: the scripted agent policy. reference: the user side of the reference row.
    repeat_run: a message repeated this many times in a row counts as verbatim repetition.
    transcripts: write every dialogue. batch: `all` = one lockstep batch over all domains (cheapest;
    re-sampling counts per simulator), `domain` = one batch per domain (those counts per domain).
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


# ----------------------------------------------------------------------------------------------
# Detectors on single user turns (pure functions, tested on written transcripts)
# ----------------------------------------------------------------------------------------------

# What "stating the want" means per domain: the card's own value for these slots, or these words.
WANT_SLOTS: dict[str, tuple[str, ...]] = {
    "shopping": ("category",),
    "bargain": ("item",),
    "campsite": ("high", "medium", "low"),
    "travel": ("kind", "food"),
    "support": (),
    "returns": ("item", "order"),
    "content": ("genre",),
    "tutoring": ("topic",),
}
WANT_WORDS: dict[str, str] = {
    "shopping": r"headphones?|earbuds|backpack|bag|jacket|coat|sneakers?|shoes|trainers|watch|lamp",
    "bargain": r"\bbuy|purchase|how much|price",
    "campsite": r"supplies|packages?",
    "travel": r"\bbook|reserv|table for|a room|hotel|restaurant",
    "support": r"internet|wi-?fi|connection|router|online|network|modem",
    "returns": r"\breturn|refund|send (?:it )?back|exchange",
    "content": r"movie|film|something to watch|comedy|drama|thriller|documentary|horror|romance|sci-?fi",
    "tutoring": r"math|arithmetic|fraction|multipl|negative|subtract|divid|homework|problem|equation",
}


def want_stated(message: str, goal: GoalCard, domain: str) -> bool:
    """Does this user message say what the user is after (the item, the task, the problem)?"""
    if not message.strip():
        return False
    for name in WANT_SLOTS.get(domain, ()):
        value = goal.slots.get(name)
        if value is not None and not isinstance(value, bool) and mentions(value, message):
            return True
    words = WANT_WORDS.get(domain)
    return bool(words and re.search(rf"(?:{words})", message, re.IGNORECASE))


def verbatim_runs(messages: Sequence[str], run: int = 3) -> int:
    """How many times a non-empty message is the `run`-th (or later) identical one in a row."""
    count, streak, last = 0, 0, None
    for message in messages:
        text = normalise(message)
        if text and text == last:
            streak += 1
        else:
            streak = 1 if text else 0
        last = text or None
        if streak >= run:
            count += 1
    return count


def turns_until_want(messages: Sequence[str], goal: GoalCard, domain: str) -> int | None:
    """1-based index of the first user turn that states the want (None: never)."""
    for i, message in enumerate(messages, start=1):
        if want_stated(message, goal, domain):
            return i
    return None


# ----------------------------------------------------------------------------------------------
# Per-dialogue and per-(simulator, domain) measurements
# ----------------------------------------------------------------------------------------------


@dataclass
class DialogueMeasure:
    """What one finished dialogue says about its user side."""

    success: bool
    reward: float
    user_turns: int  # turns the agent saw (a message reached it)
    contradicting_turns: int
    contradicted_slots: list[str]
    want_turn: int | None
    repeats: int
    with_reasoning: int
    invalid_end: str | None
    end_reason: str | None


def measure_dialogue(state: EpisodeState, repeat_run: int = 3) -> DialogueMeasure:
    """Read one finished dialogue's trace (the user side's replies and the verdict)."""
    user_turns = [t for t in state.trace if t.role == "user"]
    delivered = [t for t in user_turns if not str(t.meta.get("end_reason", "")).startswith("invalid_turn")]
    messages = [t.content for t in delivered]
    slots: list[str] = []
    contradicting = 0
    for message in messages:
        found = goal_contradictions(message, state.goal, state.domain)
        contradicting += bool(found)
        slots += found
    invalid = next(
        (
            str(t.meta["end_reason"])
            for t in user_turns
            if str(t.meta.get("end_reason", "")).startswith("invalid_turn")
        ),
        None,
    )
    verdict = state.verdict
    return DialogueMeasure(
        success=bool(verdict and verdict.success),
        reward=float(verdict.reward if verdict else 0.0),
        user_turns=len(delivered),
        contradicting_turns=contradicting,
        contradicted_slots=slots,
        want_turn=turns_until_want(messages, state.goal, state.domain),
        repeats=verbatim_runs(messages, repeat_run),
        with_reasoning=sum(1 for t in delivered if (t.reasoning or "").strip()),
        invalid_end=invalid,
        end_reason=state.end_reason,
    )


def _share(num: float, den: float) -> float | None:
    return num / den if den else None


def aggregate(measures: Sequence[DialogueMeasure]) -> dict[str, Any]:
    """Per-(simulator, domain) row from its dialogues."""
    n = len(measures)
    turns = sum(m.user_turns for m in measures)
    stated = [m.want_turn for m in measures if m.want_turn is not None]
    slots: dict[str, int] = {}
    for m in measures:
        for s in m.contradicted_slots:
            slots[s] = slots.get(s, 0) + 1
    ends: dict[str, int] = {}
    for m in measures:
        ends[str(m.end_reason)] = ends.get(str(m.end_reason), 0) + 1
    return {
        "dialogues": n,
        "success_rate": _share(sum(m.success for m in measures), n),
        "mean_reward": float(np.mean([m.reward for m in measures])) if n else None,
        "user_turns": turns,
        "contradiction_rate": _share(sum(m.contradicting_turns for m in measures), turns),
        "contradicted_slots": slots,
        "turns_to_want": float(np.mean(stated)) if stated else None,
        "want_never_share": _share(sum(1 for m in measures if m.want_turn is None), n),
        "verbatim_repeats": sum(m.repeats for m in measures),
        "repeat_dialogue_share": _share(sum(1 for m in measures if m.repeats), n),
        "reasoning_share": _share(sum(m.with_reasoning for m in measures), turns),
        "invalid_end_share": _share(sum(1 for m in measures if m.invalid_end), n),
        "end_reasons": ends,
    }


def _stats_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float | None]:
    """Role breaks and invalid turns of one run, from the simulator's cumulative `stats`."""
    samples = after.get("total", 0.0) - before.get("total", 0.0)
    turns = after.get("turns", 0.0) - before.get("turns", 0.0)
    breaks = after.get("role_breaks", 0.0) - before.get("role_breaks", 0.0)
    failed = after.get("failed", 0.0) - before.get("failed", 0.0)
    clean = after.get("clean", 0.0) - before.get("clean", 0.0)
    repeats = after.get("repeats", 0.0) - before.get("repeats", 0.0)
    caught = after.get("contradicting", 0.0) - before.get("contradicting", 0.0)
    return {
        "samples": samples,
        "role_break_rate": _share(breaks, turns),
        "repeat_resample_rate": _share(repeats, turns),
        "contradiction_resample_rate": _share(caught, turns),
        "failed_turn_rate": _share(failed, turns),
        "clean_rate": _share(clean, samples),
    }


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
    }


@dataclass
class EnvironmentRun:
    """Rows per user side (the reference first) and domain, plus the transcripts."""

    rows: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    overall: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    transcripts: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "rows": self.rows,
            "overall": self.overall,
            "seconds": self.seconds,
        }


def play_side(name: str, user_for: Any, settings: EnvironmentSettings, run: EnvironmentRun) -> None:
    """Every domain's dialogues of one user side. `batch: all`: one lockstep `run_rollouts` over all
    domains (widest batches, cheapest; re-sampling counts then exist per simulator only);
    `batch: domain`: one per domain (re-sampling counts per domain). `user_for(domain)` gives the
    user side (the same simulator object for every domain)."""
    from mimesis_rl.envs.multi import MultiDomainEnv, PerDomainAgent
    from mimesis_rl.envs.registry import make_env, scripted_agent
    from mimesis_rl.rollout import run_rollouts

    domains = settings.domain_names()
    groups = [domains] if settings.batch == "all" else [[d] for d in domains]
    rows: dict[str, dict[str, Any]] = {}
    everything: list[DialogueMeasure] = []
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
            stats_rows.append((group, _stats_delta(before, after)))
        records = result.records()
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
                _fmt(row["success_rate"]),
                row["mean_reward"] or 0.0,
                _fmt(row["contradiction_rate"]),
                row["user_turns"],
            )
    run.rows[name] = rows
    overall = aggregate(everything)
    if stats_rows:
        weights = [float(sum(rows[d]["user_turns"] for d in g)) for g, _ in stats_rows]
        for key in ("role_break_rate", "repeat_resample_rate", "contradiction_resample_rate",
                    "failed_turn_rate", "clean_rate"):
            overall[key] = _weighted([delta.get(key) for _, delta in stats_rows], weights)
        overall["samples"] = sum(delta.get("samples") or 0.0 for _, delta in stats_rows)
    run.overall[name] = overall
    run.seconds[name] = round(time.perf_counter() - start, 3)


def _weighted(values: Sequence[float | None], weights: Sequence[float]) -> float | None:
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None and w]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def add_ratios(run: EnvironmentRun) -> None:
    """success / reward ratio of each simulator to the reference, per domain and overall."""
    ref = run.rows.get(REFERENCE)
    if ref is None:
        return
    for name, rows in run.rows.items():
        for domain, row in rows.items():
            base = ref.get(domain, {})
            row["success_ratio"] = _ratio(row.get("success_rate"), base.get("success_rate"))
            row["reward_ratio"] = _ratio(row.get("mean_reward"), base.get("mean_reward"))
        overall, base = run.overall[name], run.overall[REFERENCE]
        overall["success_ratio"] = _ratio(overall.get("success_rate"), base.get("success_rate"))
        overall["reward_ratio"] = _ratio(overall.get("mean_reward"), base.get("mean_reward"))
        ratios = [row["success_ratio"] for row in rows.values() if row.get("success_ratio") is not None]
        overall["min_success_ratio"] = min(ratios) if ratios else None


def _ratio(value: float | None, reference: float | None) -> float | None:
    if value is None or not reference:
        return None
    return value / reference


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


# ----------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------

ENV_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("success_rate", "Success ↑", "{:.2f}"),
    ("success_ratio", "÷ reference ↑", "{:.2f}"),
    ("mean_reward", "Reward ↑", "{:.2f}"),
    ("reward_ratio", "Reward ÷ ref ↑", "{:.2f}"),
    ("contradiction_rate", "Contradictions / user turn ↓", "{:.3f}"),
    ("contradiction_resample_rate", "Contradictions caught / turn", "{:.3f}"),
    ("turns_to_want", "Turns to want ↓", "{:.1f}"),
    ("want_never_share", "Want never stated ↓", "{:.2f}"),
    ("verbatim_repeats", "Verbatim ×3 ↓", "{:d}"),
    ("reasoning_share", "Turns with reasoning ↑", "{:.2f}"),
    ("role_break_rate", "Role breaks / turn ↓", "{:.3f}"),
    ("repeat_resample_rate", "3rd copies re-sampled / turn ↓", "{:.3f}"),
    ("invalid_end_share", "Invalid-turn endings ↓", "{:.2f}"),
    ("user_turns", "User turns", "{:d}"),
)


def _cell(row: Mapping[str, Any], key: str, fmt: str) -> str:
    value = row.get(key)
    if value is None:
        return "–"
    return fmt.format(int(value)) if fmt == "{:d}" else fmt.format(float(value))


def env_table(run: EnvironmentRun) -> str:
    """Markdown: one row per user side × domain, plus an `all` row per user side."""
    header = "| User side | Domain | " + " | ".join(t for _, t, _ in ENV_COLUMNS) + " |"
    rule = "|---|---|" + "|".join("---:" for _ in ENV_COLUMNS) + "|"
    lines = [header, rule]
    for name, rows in run.rows.items():
        for domain, row in rows.items():
            lines.append(
                f"| {name} | {domain} | " + " | ".join(_cell(row, k, f) for k, _, f in ENV_COLUMNS) + " |"
            )
        overall = run.overall[name]
        lines.append(
            f"| **{name}** | **all** | " + " | ".join(_cell(overall, k, f) for k, _, f in ENV_COLUMNS) + " |"
        )
    return "\n".join(lines)


HEATMAP_PANELS = (
    ("success_rate", "success rate", 0.0, 1.0, "RdYlGn"),
    ("mean_reward", "mean reward", 0.0, 1.0, "RdYlGn"),
    ("contradiction_rate", "contradictions / user turn", 0.0, 0.2, "RdYlGn_r"),
    ("reasoning_share", "user turns with reasoning", 0.0, 1.0, "RdYlGn"),
)


def heatmap(run: EnvironmentRun, path: str | Path) -> Path:
    """User sides × domains, one panel per headline metric (grey = not available)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mimesis_rl.fsutil import atomic_open

    names = list(run.rows)
    domains = list(run.settings.get("domains") or next(iter(run.rows.values()), {}))
    fig, axes = plt.subplots(
        1, len(HEATMAP_PANELS), figsize=(4.2 * len(HEATMAP_PANELS), 0.6 * len(names) + 2.2)
    )
    for ax, (key, title, low, high, cmap) in zip(axes, HEATMAP_PANELS, strict=True):
        grid = np.array(
            [
                [np.nan if run.rows[n].get(d, {}).get(key) is None else run.rows[n][d][key] for d in domains]
                for n in names
            ],
            dtype=float,
        )
        colours = plt.get_cmap(cmap).copy()
        colours.set_bad("#dddddd")
        ax.imshow(np.ma.masked_invalid(grid), cmap=colours, vmin=low, vmax=high, aspect="auto")
        ax.set_xticks(range(len(domains)), domains, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.set_title(title, fontsize=9)
        for i in range(len(names)):
            for j in range(len(domains)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7)
    fig.suptitle("Scripted agent vs each user side, per domain (same seeds)", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
    return path


def env_markdown(run: EnvironmentRun, png_name: str = "environment.png") -> list[str]:
    """The report section (lines) for `fidelity.md`."""
    s = run.settings
    cost = ", ".join(f"{n} {sec:.0f} s" for n, sec in run.seconds.items())
    return [
        "## As an environment: the scripted agent against each simulator",
        "",
        f"{len(s.get('seeds', []))} seeded dialogue(s) per domain (seeds {s.get('seeds')}), the same "
        f"for every user side; agent `{s.get('agent')}`, "
        f"at most {s.get('max_turns') or 'the domain’s'} agent turns. "
        f"`{REFERENCE}` is the user side `{s.get('reference')}`. Wall time: {cost}.",
        "",
        env_table(run),
        "",
        "Contradictions: user turns stating a goal-slot value the card does not hold (word values of the "
        "domain's other cards, numbers stated with the slot's name), as delivered; caught: samples the "
        "runtime re-sampled for contradicting the card (a turn where every sample did is delivered). "
        "Turns to want: first user turn that "
        "names what the user is after (mean over dialogues where it is named). Verbatim ×3: a message "
        "repeated a third time in a row as delivered; 3rd copies re-sampled: the runtime caught one and "
        "re-sampled it, per user turn. Role breaks: outputs re-sampled for breaking the user role, per "
        "user turn. Invalid-turn endings: dialogues the simulator ended because no valid turn came.",
        "",
        f"![environment]({png_name})",
        "",
        *verdict_lines(run),
    ]


def env_summary(run: EnvironmentRun) -> dict[str, dict[str, float]]:
    """Scalars per user side: overall and per domain (`<domain>.<metric>`), for MLflow and metrics."""
    keys = (
        "success_rate",
        "success_ratio",
        "min_success_ratio",
        "mean_reward",
        "reward_ratio",
        "contradiction_rate",
        "turns_to_want",
        "want_never_share",
        "verbatim_repeats",
        "reasoning_share",
        "role_break_rate",
        "repeat_resample_rate",
        "contradiction_resample_rate",
        "failed_turn_rate",
        "invalid_end_share",
        "user_turns",
        "dialogues",
    )
    out: dict[str, dict[str, float]] = {}
    for name, rows in run.rows.items():
        row = {k: float(run.overall[name][k]) for k in keys if run.overall[name].get(k) is not None}
        for domain, values in rows.items():
            row.update({f"{domain}.{k}": float(values[k]) for k in keys if values.get(k) is not None})
        row["seconds"] = run.seconds[name]
        out[name] = row
    return out


def headline(run: EnvironmentRun) -> list[str]:
    """One plain line per simulator for the log (a measurement: nothing fails on it)."""
    lines = []
    for name, overall in run.overall.items():
        lines.append(
            f"{name}: success {_fmt(overall.get('success_rate'))} (min ratio to reference over domains "
            f"{_fmt(overall.get('min_success_ratio'))}), "
            f"contradictions/turn {_fmt(overall.get('contradiction_rate'))}, "
            f"verbatim x3 {overall.get('verbatim_repeats')}, "
            f"reasoning share {_fmt(overall.get('reasoning_share'))}, "
            f"invalid endings {_fmt(overall.get('invalid_end_share'))}"
        )
    return lines


# The bar for a simulator to train agents against (issue 15, "Done when"): measured, not enforced.
BAR = (
    "success ≥ ½ of the reference's in every domain, contradictions ≤ 5% of user turns, no turn repeated "
    "verbatim 3× in a row, reasoning on every user turn"
)


def shortfalls(run: EnvironmentRun) -> dict[str, list[str]]:
    """Per simulator, where it falls short of `BAR` (empty list: it meets it)."""
    out: dict[str, list[str]] = {}
    for name, overall in run.overall.items():
        if name == REFERENCE:
            continue
        short = []
        low = [
            d
            for d, row in run.rows[name].items()
            if row.get("success_ratio") is not None and row["success_ratio"] < 0.5
        ]
        if low:
            short.append(f"success below half the reference's in {', '.join(low)}")
        rate = overall.get("contradiction_rate")
        if rate is not None and rate > 0.05:
            short.append(f"contradictions on {rate:.1%} of user turns")
        if overall.get("verbatim_repeats"):
            short.append(f"{overall['verbatim_repeats']} verbatim triple repeat(s)")
        share = overall.get("reasoning_share")
        if share is not None and share < 1.0:
            short.append(f"reasoning on {share:.0%} of user turns")
        out[name] = short
    return out


def verdict_lines(run: EnvironmentRun) -> list[str]:
    """Markdown lines: each simulator against `BAR`."""
    lines = [f"Against the bar for an agent-training environment ({BAR}):", ""]
    for name, short in shortfalls(run).items():
        lines.append(f"- {name}: " + ("meets it" if not short else "short: " + "; ".join(short)))
    return [*lines, ""]
