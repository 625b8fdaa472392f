"""`benchmarks.sim_env --compare`: a folder's success minus the base's on the same goals, paired by
domain and seed, read from its interval."""

from __future__ import annotations

import pytest

from benchmarks.sim_env import compared
from mimesis_rl.envs.loop import play
from mimesis_rl.envs.registry import make_env, scripted_agent, scripted_user


def _records(preset: str, domains: tuple[str, ...] = ("bargain", "shopping")) -> list[dict]:
    out = []
    for d in domains:
        states = play(make_env(d), scripted_agent(d), scripted_user(d, preset), list(range(12)))
        out += [{"folder": preset, **s.to_record(agent="scripted", user=preset)} for s in states]
    return out


def test_a_folder_minus_itself_is_zero_and_a_better_user_reads_as_a_gain() -> None:
    cooperative, mixed = _records("cooperative"), _records("train_mix")
    same = compared(cooperative + [{**r, "folder": "copy"} for r in cooperative], "cooperative")
    assert same["success_minus_base"]["copy"]["diff"] == 0.0
    assert same["success_minus_base"]["copy"]["verdict"] == "within noise"

    result = compared(cooperative + mixed, "train_mix")["success_minus_base"]["cooperative"]
    wins = {p: sum(bool(r["success"]) for r in recs) for p, recs in
            (("cooperative", cooperative), ("train_mix", mixed))}
    assert result["pairs"] == 24
    assert result["diff"] == pytest.approx((wins["cooperative"] - wins["train_mix"]) / 24)
    assert result["ci"][0] <= result["diff"] <= result["ci"][1]
    with pytest.raises(SystemExit, match="not among"):
        compared(cooperative, "nobody")
