"""The evidence point's numbers: the paper's three claims with the size each was read at, the issue's
done-when checks as pass / fail from the numbers, and the learning curves the stages recorded.

Nothing is measured here: it reads what `sim_eval` (fidelity.json, with its environment part),
`agent_eval` (generalisation.json, rows.json) and the training stages (`curve` in metrics/*.json)
wrote after a run, and applies the same rules as the claims table (`eval.claims`): verdicts from
intervals, never from point estimates, and whatever verdict the numbers give. A missing input makes
its row `not measured` with the reason; it is never an error.

Done-when checks (issue 27), each `pass`, `fail` or `not measured`:

- `environment`: the scripted agent's success against the candidate simulator is at least
  `env_ratio` of its success against the cooperative scripted user in at least `env_domains`
  domains (a domain where the cooperative user's success is 0 is not comparable: it does not count);
- `card_decisions`: in those same dialogues the candidate accepts the proposals its card accepts
  more often than those its card turns down, within each domain and combined, the interval of the
  difference wholly above 0 (an always-yes user passes `environment`, the scripted agents mostly
  proposing what the card takes, and fails this; so does a user that decides by domain, not card);
- `turing_distance`: the candidate's Turing distance on held-out real users is below the assistant
  baseline's with the two intervals apart;
- `agent_vs_sft`: the MIMESIS-trained agent's greedy success on the unseen panel beats the warm
  start's with the paired interval wholly above 0 (agent_eval's comparison when configured, else the
  same paired bootstrap over agent_eval's rows; `not measured` when the warm start was not evaluated);
- `claims_size`: the agent claims were read on at least `min_members` unseen members with at least
  `min_seeds` paired seeds per member per domain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mimesis_rl.eval.claims import HOLDS, MISSING, apart_verdict, claims_table
from mimesis_rl.eval.evidence_settings import EvidenceSettings
from mimesis_rl.fsutil import read_json
from mimesis_rl.stats import interval_verdict, paired_difference

PASS, FAIL = "pass", "fail"
CHECKS = ("environment", "card_decisions", "turing_distance", "agent_vs_sft", "claims_size")



# -- learning curves --------------------------------------------------------------------------------


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def clean_curve(points: Any) -> list[dict[str, float]]:
    """A stage's `curve` list as points with a step and numeric values only, in step order."""
    out = []
    for p in points if isinstance(points, list) else []:
        if isinstance(p, Mapping) and _number(p.get("step")):
            out.append({"step": int(p["step"]), **{k: float(v) for k, v in p.items()
                                                     if k != "step" and _number(v)}})
    return sorted(out, key=lambda p: p["step"])


def read_curves(metrics_dir: str | Path) -> dict[str, list[dict[str, float]]]:
    """Every metrics file with a non-empty `curve`: {stage (`sim_rl`, `agent_rl@mimesis`): points}."""
    folder = Path(metrics_dir)
    curves = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        metrics = read_json(path)
        points = clean_curve(metrics.get("curve")) if isinstance(metrics, Mapping) else []
        if points:
            curves[path.stem] = points
    return curves


def curve_files(metrics_dir: str | Path) -> list[str]:
    """The metrics files the curves come from (inputs of the stage's lineage)."""
    return [str(Path(metrics_dir) / f"{stage}.json") for stage in read_curves(metrics_dir)]


def split_curves(curves: Mapping[str, Sequence[Mapping[str, float]]]) -> dict[str, dict[str, Any]]:
    """Simulator stages (`sim_*`) and agent stages (`agent_*`, one line per variant)."""
    return {"simulator": {k: list(v) for k, v in curves.items() if k.startswith("sim_")},
            "agents": {k: list(v) for k, v in curves.items() if k.startswith("agent_")}}


# -- looking rows up --------------------------------------------------------------------------------


def _key(name: str) -> str:
    """`sft+rl` and `sft_rl` name the same row (metrics files use MLflow-safe keys)."""
    return name.replace("+", "_")


def find_row(table: Mapping[str, Any] | None, name: str) -> Any | None:
    """`table[name]`, matching `sft+rl` with `sft_rl`."""
    for key, value in (table or {}).items():
        if _key(key) == _key(name):
            return value
    return None


def decision_numbers(fidelity: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The decision-agreement rate of one simulator (`eval.decisions`), wherever sim_eval put it: in
    its results row (flat or under `decisions`) or in a top-level `decisions` block per simulator."""
    fidelity = fidelity or {}
    row = find_row(fidelity.get("results"), name) or {}
    for block in (row.get("decisions"), row, find_row(fidelity.get("decisions"), name)):
        if isinstance(block, Mapping) and _number(block.get("decision_accuracy")):
            return {k: block.get(k) for k in ("decision_accuracy", "decisions", "answer_rate", "questions")}
    return None


# -- the claims -------------------------------------------------------------------------------------


def _comparison_size(comparison: Mapping[str, Any] | None,
                     generalisation: Mapping[str, Any]) -> dict[str, Any]:
    overall = (comparison or {}).get("overall") or {}
    return {"members": (comparison or {}).get("of"), "seeds": len(generalisation.get("seeds") or []),
            "domains": len(generalisation.get("envs") or []), "pairs": overall.get("pairs")}


def claims(s: EvidenceSettings, fidelity: Mapping[str, Any] | None,
           generalisation: Mapping[str, Any] | None) -> dict[str, Any]:
    """The claims table (`eval.claims`, the same rows agent_eval writes) with each comparison's size and,
    beside claim 1, the decision accuracy of both simulators."""
    table = claims_table(fidelity, generalisation, s.mimesis_vs_assistant, s.csd_vs_rl,
                         final=s.candidate, baseline=s.baseline)
    g = generalisation or {}
    comps = g.get("comparisons") or {}
    rows = []
    for row in table["rows"]:
        row = dict(row)
        if row["id"] == 1:
            results = (fidelity or {}).get("results") or {}
            cand = find_row(results, s.candidate) or {}
            row["n"] = {"turns": cand.get("turns"), "conversations": cand.get("conversations")}
            row["decisions"] = {s.candidate: decision_numbers(fidelity, s.candidate),
                                s.baseline: decision_numbers(fidelity, s.baseline)}
        else:
            name = s.mimesis_vs_assistant if row["id"] == 2 else s.csd_vs_rl
            comp = comps.get(name)
            row["comparison"] = name
            row["n"] = _comparison_size(comp, g) if comp and comp.get("measured") else None
        rows.append(row)
    return {"rows": rows, "rules": table["rules"]}


# -- the done-when checks ---------------------------------------------------------------------------


def _check(check_id: str, text: str, status: str, measured: str, **numbers: Any) -> dict[str, Any]:
    return {"id": check_id, "check": text, "status": status, "measured": measured, "numbers": numbers}


def _pct(value: Any) -> str:
    return f"{100 * value:.0f}%" if _number(value) else "–"


def environment_check(s: EvidenceSettings, fidelity: Mapping[str, Any] | None,
                      environment: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Per domain: success against the candidate >= env_ratio x success against the reference."""
    text = (f"scripted agent's success vs `{s.candidate}` >= {s.env_ratio:g} x its success vs the "
            f"cooperative scripted user in >= {s.env_domains} domains")
    env = environment or (fidelity or {}).get("environment") or {}
    rows = env.get("rows") or {}
    cand, ref = find_row(rows, s.candidate), find_row(rows, s.reference)
    if not cand or not ref:
        missing = [n for n, r in ((s.candidate, cand), (s.reference, ref)) if not r]
        return _check("environment", text, MISSING, f"sim_eval's environment part has no row for "
                      f"{', '.join(missing)}")
    domains = []
    for domain in sorted(set(cand) | set(ref)):
        c, r = (cand.get(domain) or {}).get("success_rate"), (ref.get(domain) or {}).get("success_rate")
        comparable = _number(c) and _number(r) and r > 0
        ok = bool(comparable and c >= s.env_ratio * r - 1e-12)
        domains.append({"domain": domain, "candidate": c, "reference": r,
                        "ratio": c / r if comparable else None, "meets": ok,
                        "dialogues": (cand.get(domain) or {}).get("dialogues")})
    met = sum(d["meets"] for d in domains)
    status = PASS if met >= s.env_domains else FAIL
    measured = f"{met} of {len(domains)} domains at >= {s.env_ratio:g} of the cooperative user's success"
    not_comparable = [d["domain"] for d in domains if d["ratio"] is None]
    if not_comparable:
        measured += f" (not comparable: {', '.join(not_comparable)})"
    decides = {k: v for k, v in (find_row(env.get("overall") or {}, s.candidate) or {}).items()
               if k.startswith("card_")}
    if decides.get("card_decisions"):
        measured += (f"; on the {decides['card_decisions']} proposals its dialogues met it decided as its "
                     f"card {_pct(decides.get('card_agreement'))}, and where the card accepts it said yes "
                     f"{_pct(decides.get('card_yes_rate'))}, neither yes nor no "
                     f"{_pct(decides.get('card_neither_rate'))}")
    return _check("environment", text, status, measured, domains=domains, met=met, of=len(domains),
                  decisions=decides)


def card_check(s: EvidenceSettings, fidelity: Mapping[str, Any] | None,
               environment: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The candidate's yes-rate where its card accepts minus where its card declines, over the
    proposals its environment dialogues met (`eval.decisions.dialogue_decisions`, as the environment
    read each reply), interval above 0. Within each domain, then combined (`eval.decisions.card_gap`):
    pooled, a user that says yes in bargain and no in travel passed at +0.22 [0.02, 0.41] with no
    domain where it told the two apart (the fourth run's SFT simulator at temperature 0.2; within
    domains −0.08 [−0.22, 0.08]). Proposals are treated as independent, though several can share a
    dialogue."""
    text = (f"`{s.candidate}` decides by its card in those dialogues: it accepts where its card "
            "accepts more often than where its card declines, interval above 0")
    env = environment or (fidelity or {}).get("environment") or {}
    decided = find_row(env.get("decisions") or {}, s.candidate)
    if not decided or not decided.get("by_domain"):
        return _check("card_decisions", text, MISSING, f"sim_eval's environment part has no decisions of "
                      f"{s.candidate}")
    from mimesis_rl.eval.decisions import card_gap

    gap = card_gap(decided["by_domain"])  # recomputed: a fidelity.json from before it has the counts
    (yes_a, n_a), (yes_d, n_d) = gap["yes_where_accepts"], gap["yes_where_declines"]
    pooled = (f"yes where its card accepts {yes_a}/{n_a}, where its card declines {yes_d}/{n_d} "
              f"(pooled {yes_a / n_a - yes_d / n_d:+.2f})" if n_a and n_d else "")
    if gap["diff"] is None:
        return _check("card_decisions", text, MISSING, f"{n_a} proposals its card accepts and {n_d} it "
                      "declines, and no domain with both: both sides are needed within a domain")
    verdict = interval_verdict(gap["ci"])
    lo, hi = gap["ci"]
    measured = (f"{pooled}; within domains ({', '.join(gap['strata'])}) {gap['diff']:+.2f} "
                f"[{lo:.2f}, {hi:.2f}] ({verdict})")
    return _check("card_decisions", text, PASS if verdict == HOLDS else FAIL, measured, diff=gap["diff"],
                  ci=gap["ci"], yes_where_accepts=[yes_a, n_a], yes_where_declines=[yes_d, n_d],
                  domains=gap["strata"], domains_one_sided=gap["left_out"],
                  verdict=verdict, reasoning=(decided.get("reasoning") or {}).get("total"))


def turing_check(s: EvidenceSettings, fidelity: Mapping[str, Any] | None) -> dict[str, Any]:
    """The candidate's Turing distance below the baseline's, intervals apart."""
    text = (f"`{s.candidate}`'s Turing distance on held-out real users below `{s.baseline}`'s, "
            "intervals apart")
    results = (fidelity or {}).get("results") or {}
    cand, base = find_row(results, s.candidate), find_row(results, s.baseline)
    if not cand or not base or cand.get("turing_distance") is None or base.get("turing_distance") is None:
        return _check("turing_distance", text, MISSING, "sim_eval's fidelity.json lacks the Turing "
                      f"distance of {s.candidate if not cand else s.baseline}")
    cc, bc = cand.get("turing_distance_ci"), base.get("turing_distance_ci")
    verdict = apart_verdict(cc, bc, lower_is_better=True)
    if verdict == MISSING:
        return _check("turing_distance", text, MISSING, "no interval on one of the two rows")
    measured = (f"{s.candidate} {cand['turing_distance']:.1f} [{cc[0]:.1f}, {cc[1]:.1f}] vs {s.baseline} "
                f"{base['turing_distance']:.1f} [{bc[0]:.1f}, {bc[1]:.1f}] ({verdict})")
    return _check("turing_distance", text, PASS if verdict == HOLDS else FAIL, measured,
                  candidate=cand["turing_distance"], candidate_ci=cc, baseline=base["turing_distance"],
                  baseline_ci=bc, verdict=verdict, turns=cand.get("turns"))


def paired_success(rows: Sequence[Mapping[str, Any]], a: str, b: str, n_boot: int,
                   confidence: float) -> dict[str, Any] | None:
    """a − b in success on the dialogues both met, pooled over unseen members (each weighs the same),
    with the same paired bootstrap as agent_eval's comparisons (`eval.generalisation_metrics.analyse`)."""
    values = {x: {(r["member"], r["env"], r["seed"]): float(r["success"]) for r in rows if r["agent"] == x}
              for x in (a, b)}
    if not values[a] or not values[b]:
        return None
    members = sorted({k[0] for k in values[a]} & {k[0] for k in values[b]})
    d = paired_difference(values[a], values[b], n_boot, confidence, seed=len(members), strata=lambda k: k[0])
    return {**d, "members": len(members), "verdict": interval_verdict(d["ci"])}


def sft_check(s: EvidenceSettings, generalisation: Mapping[str, Any] | None,
              rows: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """The MIMESIS-trained agent's greedy success on the unseen panel minus the warm start's, paired."""
    text = (f"`{s.mimesis_agent}`'s greedy success on the unseen panel beats `{s.sft_agent}`'s, "
            "paired interval above 0")
    g = generalisation or {}
    agents = g.get("agents") or []
    absent = [x for x in (s.mimesis_agent, s.sft_agent) if x not in agents]
    if not g or absent:
        why = "agent_eval did not run" if not g else f"{', '.join(absent)} not among agent_eval's agents"
        return _check("agent_vs_sft", text, MISSING, why)
    comp = next((c for c in (g.get("comparisons") or {}).values()
                 if c.get("measured") and c.get("a") == s.mimesis_agent and c.get("b") == s.sft_agent
                 and c.get("metric") == "success"), None)
    if comp is not None:
        d, source = {**comp["overall"], "members": comp.get("of")}, "agent_eval's comparison"
    else:
        settings = g.get("settings") or {}
        d = paired_success(rows or [], s.mimesis_agent, s.sft_agent, int(settings.get("bootstrap", 2000)),
                           float(settings.get("confidence", 0.95)))
        source = "paired bootstrap over agent_eval's rows.json"
        if d is None:
            return _check("agent_vs_sft", text, MISSING,
                          "agent_eval's rows.json lacks the two agents' dialogues")
    verdict = d.get("verdict") or interval_verdict(d.get("ci"))
    if verdict == MISSING:
        return _check("agent_vs_sft", text, MISSING, "no paired interval")
    lo, hi = d["ci"]
    measured = (f"{s.mimesis_agent} − {s.sft_agent}: {d['diff']:+.3f} [{lo:.3f}, {hi:.3f}] over {d['pairs']} "
                f"paired dialogues on {d.get('members')} unseen members ({verdict}; {source})")
    return _check("agent_vs_sft", text, PASS if verdict == HOLDS else FAIL, measured, diff=d["diff"],
                  ci=d["ci"], pairs=d["pairs"], members=d.get("members"), verdict=verdict, source=source)


def size_check(s: EvidenceSettings, generalisation: Mapping[str, Any] | None) -> dict[str, Any]:
    """The agent claims' size: unseen members in the matrix, paired seeds per member per domain."""
    text = (f"agent claims read on >= {s.min_members} unseen members with >= {s.min_seeds} paired seeds "
            "per member per domain")
    if not generalisation:
        return _check("claims_size", text, MISSING, "agent_eval did not run")
    members = len(generalisation.get("members") or [])
    seeds = len(generalisation.get("seeds") or [])
    domains = len(generalisation.get("envs") or [])
    ok = members >= s.min_members and seeds >= s.min_seeds
    return _check("claims_size", text, PASS if ok else FAIL,
                  f"{members} members x {domains} domains x {seeds} seeds", members=members,
                  domains=domains, seeds=seeds)


def done_when(s: EvidenceSettings, fidelity: Mapping[str, Any] | None,
              generalisation: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]] | None = None,
              environment: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    return [environment_check(s, fidelity, environment), card_check(s, fidelity, environment),
            turing_check(s, fidelity),
            sft_check(s, generalisation, rows), size_check(s, generalisation)]


def collect(s: EvidenceSettings) -> dict[str, Any]:
    """Everything from one finished run's files: claims, checks, curves, and which inputs were found."""
    fidelity = read_json(s.fidelity)
    environment = read_json(Path(s.sim_eval) / "environment.json")
    generalisation = read_json(s.generalisation)
    rows = read_json(s.rows)
    curves = read_curves(s.metrics)
    table = claims(s, fidelity, generalisation)
    return {
        "claims": table["rows"],
        "rules": table["rules"],
        "checks": done_when(s, fidelity, generalisation, rows, environment),
        "curves": split_curves(curves),
        "inputs": {str(p): Path(p).is_file() for p in (s.fidelity, Path(s.sim_eval) / "environment.json",
                                                      s.generalisation, s.rows)}
        | {f"{s.metrics}/{k}.json": True for k in curves},
        "settings": dict(s.__dict__),
    }
