"""The claims table's verdicts, on written numbers."""

from __future__ import annotations

import pytest

from mimesis_rl.eval.claims import (
    FAILS,
    HOLDS,
    MISSING,
    NOISE,
    apart_verdict,
    claims_table,
    combine,
    markdown,
    read_fidelity,
)


def fidelity(turing_final, turing_base, bf_final, bf_base) -> dict:  # noqa: ANN001
    def row(t, b):  # noqa: ANN001, ANN202
        return {"turing_distance": sum(t) / 2, "turing_distance_ci": t,
                "behaviour_fidelity": sum(b) / 2, "behaviour_fidelity_ci": b}
    return {"results": {"assistant": row(turing_base, bf_base), "sft+rl": row(turing_final, bf_final)}}


def comparison(per: list[tuple[float, list[float], str]], overall_ci: list[float]) -> dict:
    diffs = [d for d, _, _ in per]
    return {"a": "x", "b": "y", "metric": "success", "measured": True,
            "per_member": [{"member": f"m{i}", "diff": d, "ci": ci, "verdict": v}
                           for i, (d, ci, v) in enumerate(per)],
            "overall": {"diff": sum(diffs) / len(diffs), "ci": overall_ci, "pairs": 10},
            "better": sum(d > 0 for d in diffs), "better_clear": sum(v == HOLDS for _, _, v in per),
            "worse_clear": sum(v == FAILS for _, _, v in per), "of": len(per)}


def test_simulator_claim_from_fidelity_intervals() -> None:
    holds = claims_table(fidelity([10, 20], [40, 60], [0.8, 0.9], [0.5, 0.6]), None)["rows"][0]
    assert holds["verdict"] == HOLDS and "turing_distance: sft+rl 15.000 [10.000, 20.000]" in holds["numbers"]
    noise = claims_table(fidelity([10, 45], [40, 60], [0.8, 0.9], [0.5, 0.6]), None)["rows"][0]
    assert noise["verdict"] == NOISE
    assert [p["verdict"] for p in noise["parts"]] == [NOISE, HOLDS]
    fails = claims_table(fidelity([10, 20], [40, 60], [0.3, 0.4], [0.5, 0.6]), None)["rows"][0]
    assert fails["verdict"] == FAILS
    missing = claims_table({"results": {"assistant": {}}}, None)["rows"][0]
    assert missing["verdict"] == MISSING and "sft+rl" in missing["numbers"]
    assert claims_table(None, None)["rows"][0]["verdict"] == MISSING


def test_generalisation_claim_uses_the_pooled_paired_interval() -> None:
    comp = comparison([(0.2, [0.1, 0.3], HOLDS), (0.1, [-0.1, 0.3], NOISE)], [0.02, 0.25])
    row = claims_table(None, {"comparisons": {"mimesis_vs_assistant": comp}})["rows"][1]
    assert row["verdict"] == HOLDS and "better on 2 of 2" in row["numbers"] and "+0.150" in row["numbers"]
    comp = comparison([(0.2, [0.1, 0.3], HOLDS), (-0.2, [-0.4, 0.0], NOISE)], [-0.1, 0.1])
    assert claims_table(None, {"comparisons": {"mimesis_vs_assistant": comp}})["rows"][1]["verdict"] == NOISE
    comp = comparison([(-0.3, [-0.4, -0.2], FAILS)], [-0.4, -0.2])
    assert claims_table(None, {"comparisons": {"mimesis_vs_assistant": comp}})["rows"][1]["verdict"] == FAILS
    gone = {"a": "rl-mimesis", "b": "rl-assistant", "measured": False, "missing": ["rl-assistant"]}
    row = claims_table(None, {"comparisons": {"mimesis_vs_assistant": gone}})["rows"][1]
    assert row["verdict"] == MISSING and "rl-assistant" in row["numbers"]


def test_csd_claim_needs_every_unseen_simulator() -> None:
    every = comparison([(0.2, [0.1, 0.3], HOLDS), (0.1, [0.05, 0.2], HOLDS)], [0.1, 0.2])
    assert claims_table(None, {"comparisons": {"csd_vs_rl": every}})["rows"][2]["verdict"] == HOLDS
    one_noisy = comparison([(0.2, [0.1, 0.3], HOLDS), (0.1, [-0.05, 0.2], NOISE)], [0.05, 0.2])
    assert claims_table(None, {"comparisons": {"csd_vs_rl": one_noisy}})["rows"][2]["verdict"] == NOISE
    one_worse = comparison([(0.2, [0.1, 0.3], HOLDS), (-0.2, [-0.3, -0.1], FAILS)], [-0.1, 0.1])
    row = claims_table(None, {"comparisons": {"csd_vs_rl": one_worse}})["rows"][2]
    assert row["verdict"] == FAILS and "below 0 on 1" in row["numbers"]


def test_verdict_helpers_and_markdown(tmp_path) -> None:  # noqa: ANN001
    assert apart_verdict([1, 2], [3, 4], lower_is_better=True) == HOLDS
    assert apart_verdict([3, 4], [1, 2], lower_is_better=True) == FAILS
    assert apart_verdict([1, 3], [2, 4], lower_is_better=True) == NOISE
    assert apart_verdict(None, [2, 4], lower_is_better=True) == MISSING
    assert combine([HOLDS, HOLDS]) == HOLDS and combine([HOLDS, NOISE]) == NOISE
    assert combine([HOLDS, FAILS, MISSING]) == FAILS and combine([HOLDS, MISSING]) == MISSING
    assert combine([]) == MISSING
    text = markdown(claims_table(fidelity([10, 20], [40, 60], [0.8, 0.9], [0.5, 0.6]), None))
    assert "| 1 |" in text and "**holds**" in text and "**not measured**" in text and "How verdicts" in text
    assert read_fidelity(tmp_path / "absent.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        read_fidelity(bad)
