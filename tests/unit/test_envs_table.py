"""Every domain is solvable by its scripted agent with a cooperative user, and measurably harder with
difficult panel members (the README table, at a smaller size)."""

from __future__ import annotations

import pytest

from mimesis_rl.envs.registry import DOMAINS
from mimesis_rl.envs.table import hardest, success_table

DIFFICULT = ("scripted-withholding", "scripted-chaotic", "scripted-impatient")


@pytest.fixture(scope="module")
def table() -> dict:
    return success_table(n=80, seed=1000, members=("scripted-cooperative", *DIFFICULT))


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_scripted_agent_solves_domain_with_cooperative_user(table: dict, domain: str) -> None:
    row = table[domain]
    assert row["scripted-cooperative"]["success_rate"] >= 0.9, row["scripted-cooperative"]
    assert row["scripted-cooperative"]["invalid_actions"] == 0


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_difficult_users_make_it_measurably_harder(table: dict, domain: str) -> None:
    row = table[domain]
    cooperative = row["scripted-cooperative"]["success_rate"]
    name, worst = hardest(row, DIFFICULT)
    assert worst <= cooperative - 0.08, (name, worst, cooperative)
    mean_difficult = sum(row[m]["success_rate"] for m in DIFFICULT) / len(DIFFICULT)
    assert mean_difficult < cooperative


def test_a_turn_budget_caps_what_the_scripted_agent_wins() -> None:
    """The agents' evaluation plays 4 agent turns: the scripted agent's own success there is the ceiling
    a learned agent is read against, and it is lower than with the domain's own budget."""
    members = ("scripted-cooperative", "scripted-impatient")
    short = success_table(n=40, seed=1000, domains=["campsite"], members=members, max_turns=4)["campsite"]
    full = success_table(n=40, seed=1000, domains=["campsite"], members=members)["campsite"]
    assert short["scripted-impatient"]["success_rate"] < full["scripted-impatient"]["success_rate"]
    assert short["scripted-cooperative"]["success_rate"] >= 0.9  # it still closes the easy deals in 4
