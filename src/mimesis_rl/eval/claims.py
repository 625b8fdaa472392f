"""The paper's claims table: each claim, this run's numbers with intervals, and a verdict from them.

Verdicts are computed, never written by hand:

- a paired difference (agents): `holds` when its interval lies wholly above 0, `does not hold`
  when wholly below, `within noise` when it contains 0;
- two separately measured simulators (fidelity): `holds` when their intervals are apart in the
  claimed direction, `does not hold` when apart the other way, `within noise` when they overlap;
- a claim with several parts holds when every part holds, does not hold when any part does not,
  and is within noise otherwise; `not measured` when an input is missing (the row says which).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mimesis_rl.stats import interval_verdict

HOLDS, FAILS, NOISE, MISSING = "holds", "does not hold", "within noise", "not measured"
VERDICTS = (HOLDS, FAILS, NOISE, MISSING)


def apart_verdict(better: Sequence[float] | None, worse: Sequence[float] | None,
                  lower_is_better: bool) -> str:
    """Claim "`better` beats `worse`" from two independent intervals [lo, hi]."""
    if not better or not worse:
        return MISSING
    if lower_is_better:
        if better[1] < worse[0]:
            return HOLDS
        if better[0] > worse[1]:
            return FAILS
        return NOISE
    if better[0] > worse[1]:
        return HOLDS
    if better[1] < worse[0]:
        return FAILS
    return NOISE


def combine(verdicts: Sequence[str]) -> str:
    """Any part fails -> does not hold; else any missing -> not measured; all hold -> holds; else noise."""
    if not verdicts:
        return MISSING
    if FAILS in verdicts:
        return FAILS
    if MISSING in verdicts:
        return MISSING
    if all(v == HOLDS for v in verdicts):
        return HOLDS
    return NOISE


def _ci(ci: Sequence[float] | None, digits: int = 3) -> str:
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "[–]"


def simulator_claim(fidelity: Mapping[str, Any] | None, final: str = "sft+rl",
                    baseline: str = "assistant") -> dict[str, Any]:
    """Claim 1 from `sim_eval`'s fidelity.json: the trained simulator is closer to real users."""
    row: dict[str, Any] = {"id": 1, "claim": "The trained simulator is closer to real users than the "
                           "assistant-prompted one (Turing distance lower, behaviour fidelity higher)."}
    results = (fidelity or {}).get("results") or {}
    if final not in results or baseline not in results:
        missing = [n for n in (final, baseline) if n not in results]
        return {**row, "verdict": MISSING, "parts": [],
                "numbers": f"sim_eval results lack {', '.join(missing) or 'everything'}"}
    parts = []
    for key, lower in (("turing_distance", True), ("behaviour_fidelity", False)):
        f, b = results[final], results[baseline]
        fc, bc = f.get(f"{key}_ci"), b.get(f"{key}_ci")
        both = f.get(key) is not None and b.get(key) is not None
        verdict = apart_verdict(fc, bc, lower) if both else MISSING
        parts.append({"metric": key, "lower_is_better": lower, final: f.get(key), f"{final}_ci": fc,
                      baseline: b.get(key), f"{baseline}_ci": bc, "verdict": verdict})
    numbers = "; ".join(
        f"{p['metric']}: {final} {p[final]:.3f} {_ci(p[f'{final}_ci'])} vs {baseline} {p[baseline]:.3f} "
        f"{_ci(p[f'{baseline}_ci'])} ({p['verdict']})" if p[final] is not None and p[baseline] is not None
        else f"{p['metric']}: not measured" for p in parts)
    return {**row, "parts": parts, "numbers": numbers, "verdict": combine([p["verdict"] for p in parts])}


def generalisation_claim(comparison: Mapping[str, Any] | None) -> dict[str, Any]:
    """Claim 2: MIMESIS-trained agents beat assistant-trained ones on unseen simulators (pooled, paired)."""
    row: dict[str, Any] = {"id": 2, "claim": "Agents trained on MIMESIS generalise better to unseen "
                           "simulators than agents trained on the assistant simulator."}
    if not comparison or not comparison.get("measured"):
        missing = ", ".join((comparison or {}).get("missing", [])) or "the comparison"
        return {**row, "verdict": MISSING, "numbers": f"{missing} not evaluated"}
    o = comparison["overall"]
    verdict = interval_verdict(o["ci"])
    numbers = (f"{comparison['a']} − {comparison['b']} ({comparison['metric']}), mean over "
               f"{comparison['of']} unseen simulators: {o['diff']:+.3f} {_ci(o['ci'])}; better on "
               f"{comparison['better']} of {comparison['of']} ({comparison['better_clear']} clearly, "
               f"{comparison['worse_clear']} clearly worse)")
    return {**row, "verdict": verdict, "numbers": numbers, "overall": dict(o),
            "better": comparison["better"], "better_clear": comparison["better_clear"],
            "of": comparison["of"]}


def csd_claim(comparison: Mapping[str, Any] | None) -> dict[str, Any]:
    """Claim 3: CSD adds on every unseen simulator (each simulator's paired interval above 0)."""
    row: dict[str, Any] = {"id": 3, "claim": "CSD adds on top of RL on every unseen simulator."}
    if not comparison or not comparison.get("measured"):
        missing = ", ".join((comparison or {}).get("missing", [])) or "the comparison"
        return {**row, "verdict": MISSING, "numbers": f"{missing} not evaluated"}
    per = comparison["per_member"]
    verdict = combine([r["verdict"] for r in per])
    o = comparison["overall"]
    numbers = (f"{comparison['a']} − {comparison['b']} ({comparison['metric']}): interval above 0 on "
               f"{comparison['better_clear']} of {comparison['of']} simulators, below 0 on "
               f"{comparison['worse_clear']}; point estimate better on {comparison['better']}; mean "
               f"{o['diff']:+.3f} {_ci(o['ci'])}")
    return {**row, "verdict": verdict, "numbers": numbers, "overall": dict(o),
            "per_member": [{k: r[k] for k in ("member", "diff", "ci", "verdict")} for r in per]}


def claims_table(fidelity: Mapping[str, Any] | None, generalisation: Mapping[str, Any] | None,
                 mimesis_vs_assistant: str = "mimesis_vs_assistant", csd_vs_rl: str = "csd_vs_rl",
                 final: str = "sft+rl", baseline: str = "assistant") -> dict[str, Any]:
    """The three rows, from the two stages' JSON."""
    comparisons = (generalisation or {}).get("comparisons") or {}
    rows = [simulator_claim(fidelity, final, baseline),
            generalisation_claim(comparisons.get(mimesis_vs_assistant)),
            csd_claim(comparisons.get(csd_vs_rl))]
    return {"rows": rows, "rules": __doc__.split("Verdicts are computed, never written by hand:")[1].strip()}


def read_fidelity(path: str | Path) -> dict[str, Any] | None:
    """sim_eval's fidelity.json, or None when it does not exist (the row then says `not measured`)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def markdown(table: Mapping[str, Any]) -> str:
    lines = ["# The paper's claims, measured", "", "| # | Claim | Measured (this run) | Verdict |",
             "|---|---|---|---|"]
    for r in table["rows"]:
        lines.append(f"| {r['id']} | {r['claim']} | {r['numbers']} | **{r['verdict']}** |")
    lines += ["", "How verdicts are decided:", "", table["rules"], ""]
    return "\n".join(lines)
