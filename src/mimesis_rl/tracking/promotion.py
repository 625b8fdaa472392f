"""The promotion gate: `candidate` becomes `champion` only when the evidence says it is not worse.

Why a gate and not "newest wins": a scheduled retrain on noisy small data can produce a worse model;
users keep serving `@champion`, so that alias moves only on measured numbers, compared with the
numbers the current champion was promoted on (stored as tags on its version). The decision, its
numbers and its reasons are recorded on the candidate version either way, and the alias is read back
after the move.

    rules = [Rule("fidelity_index", "higher"), Rule("turing_distance", "lower", interval="not_worse")]
    decision = promote("mimesis-simulator", metrics={"fidelity_index": Metric(65.0), ...}, rules=rules)
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from mimesis_rl.settings import from_section

log = logging.getLogger(__name__)

TAG = "mimesis.gate"
Better = Literal["higher", "lower"]
IntervalRule = Literal["none", "not_worse", "better"]


@dataclass(frozen=True)
class Metric:
    """A measured number with its 95% interval when one was computed."""

    value: float
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, value: Any, ci: Sequence[float] | None = None) -> Metric:
        lo, hi = (float(ci[0]), float(ci[1])) if ci is not None and len(ci) == 2 else (None, None)
        return cls(float(value), lo, hi)


@dataclass(frozen=True)
class Rule:
    """One condition on one metric.

    better: which direction is better. min_gain: the candidate's value must beat the champion's by
    at least this much (negative = a tolerated loss). interval: `not_worse` = the candidate's interval
    must reach the champion's value (not significantly worse); `better` = the whole interval must lie
    on the better side of it (significantly better); `none` = point estimates only.
    """

    metric: str
    better: Better = "higher"
    min_gain: float = 0.0
    interval: IntervalRule = "none"

    def __post_init__(self) -> None:
        if self.better not in ("higher", "lower"):
            raise ValueError(f"rule {self.metric}: better must be higher|lower, got {self.better!r}")
        if self.interval not in ("none", "not_worse", "better"):
            raise ValueError(f"rule {self.metric}: interval must be none|not_worse|better, "
                             f"got {self.interval!r}")

    def check(self, candidate: Metric, champion: Metric) -> tuple[bool, str]:
        sign = 1.0 if self.better == "higher" else -1.0
        gain = sign * (candidate.value - champion.value)
        ok = gain >= self.min_gain
        why = (f"{self.metric}: {candidate.value:.4g} vs champion {champion.value:.4g} "
               f"(gain {gain:+.4g}, needs >= {self.min_gain:+.4g})")
        if ok and self.interval != "none":
            if candidate.low is None or candidate.high is None:
                return False, f"{self.metric}: the rule needs an interval and the candidate has none"
            best, worst = (candidate.high, candidate.low) if sign > 0 else (candidate.low, candidate.high)
            span = f"; interval [{candidate.low:.4g}, {candidate.high:.4g}] must"
            if self.interval == "not_worse":
                ok = sign * (best - champion.value) >= 0
                why += f"{span} reach {champion.value:.4g}"
            else:
                ok = sign * (worst - champion.value) > 0
                why += f"{span} clear {champion.value:.4g}"
        return ok, ("ok " if ok else "FAILS ") + why


@dataclass(frozen=True)
class GateSettings:
    """One registered model's gate (params.yaml `promote.simulator` / `promote.agent`).

    registered_model: the MLflow registered model; candidate_alias / champion_alias: the version to
    judge and the alias that moves. report / row: the evaluation JSON and the candidate's row in it.
    rules: the conditions (`Rule`); dry_run: decide and record, but move no alias.
    """

    registered_model: str
    report: str
    row: str
    rules: tuple[Rule, ...]
    candidate_alias: str = "candidate"
    champion_alias: str = "champion"
    dry_run: bool = False

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None, where: str) -> GateSettings:
        section = dict(section or {})
        if "rules" not in section:
            return from_section(cls, section, where)  # names the missing key
        rules = tuple(from_section(Rule, rule, f"{where}.rules[{i}]")
                      for i, rule in enumerate(section["rules"]))
        return from_section(cls, section, where, rules=rules)


@dataclass(frozen=True)
class PromoteSettings:
    """The `promote` stage (params.yaml `promote:`): the gates it runs (an absent one is skipped) and
    the folder of its decision files."""

    report_dir: str = "reports/promote"
    simulator: GateSettings | None = None
    agent: GateSettings | None = None

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None) -> PromoteSettings:
        section = dict(section or {})
        gates = {kind: GateSettings.from_section(section[kind], f"promote.{kind}")
                 for kind in ("simulator", "agent") if section.get(kind) is not None}
        return from_section(cls, section, "promote", **gates)

    def gates(self) -> dict[str, GateSettings]:
        """kind (`simulator`, `agent`) -> its gate, in that order, for the gates configured."""
        return {kind: gate for kind, gate in (("simulator", self.simulator), ("agent", self.agent))
                if gate is not None}


@dataclass
class Decision:
    """What the gate decided for one registered model, and why."""

    registered_model: str
    candidate_version: str
    champion_version: str | None
    promoted: bool
    reasons: list[str] = field(default_factory=list)
    candidate: dict[str, dict[str, float | None]] = field(default_factory=dict)
    champion: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(candidate: Mapping[str, Metric], champion: Mapping[str, Metric] | None,
           rules: Sequence[Rule]) -> tuple[bool, list[str]]:
    """Promote when there is no champion, or when every rule holds against it."""
    missing = [r.metric for r in rules
               if r.metric not in candidate or not math.isfinite(candidate[r.metric].value)]
    if missing:
        return False, [f"the candidate has no measured {', '.join(missing)}"]
    if champion is None:
        return True, ["no champion yet: the first measured candidate is promoted"]
    reasons, ok = [], True
    for rule in rules:
        if rule.metric not in champion:
            reasons.append(f"ok {rule.metric}: the champion has no recorded value (not compared)")
            continue
        holds, why = rule.check(candidate[rule.metric], champion[rule.metric])
        ok &= holds
        reasons.append(why)
    return ok, reasons


def _tags(metrics: Mapping[str, Metric]) -> dict[str, str]:
    out = {}
    for name, m in metrics.items():
        out[f"{TAG}.{name}"] = repr(m.value)
        if m.low is not None and m.high is not None:
            out[f"{TAG}.{name}.ci"] = json.dumps([m.low, m.high])
    return out


def recorded_metrics(tags: Mapping[str, str]) -> dict[str, Metric]:
    """The numbers a version was promoted on, from its tags."""
    out: dict[str, Metric] = {}
    for key, value in tags.items():
        if not key.startswith(TAG + ".") or key.endswith(".ci"):
            continue
        name = key[len(TAG) + 1:]
        if name in ("decision", "reasons", "champion_version", "compared_with"):
            continue
        try:
            ci = json.loads(tags[f"{key}.ci"]) if f"{key}.ci" in tags else None
            out[name] = Metric.of(float(value), ci)
        except (ValueError, TypeError):
            continue
    return out


def promote(registered_model: str, metrics: Mapping[str, Metric], rules: Sequence[Rule],
            candidate_alias: str = "candidate", champion_alias: str = "champion",
            client: Any = None, dry_run: bool = False) -> Decision:
    """Compare the `candidate_alias` version with the `champion_alias` one; move the champion alias
    when the rules hold (unless `dry_run`), read it back, and tag the candidate with the decision."""
    import mlflow

    client = client or mlflow.MlflowClient()
    try:
        candidate = client.get_model_version_by_alias(registered_model, candidate_alias)
    except mlflow.exceptions.MlflowException as exc:
        raise ValueError(f"{registered_model}@{candidate_alias}: no such version to promote ({exc})") from exc
    try:
        champion = client.get_model_version_by_alias(registered_model, champion_alias)
    except mlflow.exceptions.MlflowException:
        champion = None
    if champion is not None and str(champion.version) == str(candidate.version):
        reasons = [f"version {candidate.version} is already {champion_alias}"]
        return Decision(registered_model, str(candidate.version), str(champion.version), False, reasons,
                        {k: asdict(v) for k, v in metrics.items()})
    champion_metrics = recorded_metrics(champion.tags) if champion is not None else None
    ok, reasons = decide(metrics, champion_metrics, rules)
    decision = Decision(registered_model, str(candidate.version), str(champion.version) if champion else None,
                        ok and not dry_run, reasons, {k: asdict(v) for k, v in metrics.items()},
                        {k: asdict(v) for k, v in (champion_metrics or {}).items()})
    for key, value in {**_tags(metrics), f"{TAG}.decision": "promoted" if decision.promoted else
                       ("would promote (dry run)" if ok else "refused"),
                       f"{TAG}.reasons": " | ".join(reasons)[:4900],
                       f"{TAG}.compared_with": decision.champion_version or "none"}.items():
        client.set_model_version_tag(registered_model, candidate.version, key, value)
    if decision.promoted:
        client.set_registered_model_alias(registered_model, champion_alias, candidate.version)
        now = client.get_model_version_by_alias(registered_model, champion_alias)
        if str(now.version) != str(candidate.version):
            raise RuntimeError(f"{registered_model}@{champion_alias} reads back version {now.version}, "
                               f"not the promoted {candidate.version}")
        log.info("%s: version %s promoted to @%s", registered_model, candidate.version, champion_alias)
    else:
        log.warning("%s: version %s not promoted: %s", registered_model, candidate.version,
                    "; ".join(reasons))
    return decision
