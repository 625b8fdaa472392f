"""The learned leave model: which turns it learns from, that it learns the words and places real users
leave at, that it is calibrated to their rate, and that it survives a save and load."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mimesis_rl.data.schema import Conversation, Turn
from mimesis_rl.simulator.format import OPENING_CUE
from mimesis_rl.simulator.leaving import (
    LeaveModel,
    LeaveSettings,
    features,
    fit_leave_model,
    turn_cases,
    uniform,
)

CHAT = ["what do you do for fun?", "i like hiking, you?", "mostly reading", "nice, which books?",
        "fantasy mostly", "cool, any favourite?", "the hobbit", "classic choice"]


def _chat(i: int, rng: random.Random, leaves: bool) -> Conversation:
    """A chat of random length; when the user `leaves`, its last turn is a goodbye after the agent's."""
    n = rng.randint(3, 7)
    turns = []
    for _ in range(n):
        turns.append(Turn(role="user", content=rng.choice(CHAT)))
        turns.append(Turn(role="assistant", content=rng.choice(CHAT)))
    if leaves:
        turns[-1] = Turn(role="assistant", content="i have to run, nice talking to you")
        turns.append(Turn(role="user", content=rng.choice(["ok bye!", "bye, talk later", "see you, bye"])))
    return Conversation(conversation_id=f"c{i}", source="fixture", domain="chitchat", turns=turns)


def _corpus(n: int, seed: int) -> list[Conversation]:
    rng = random.Random(seed)
    return [_chat(i, rng, leaves=i % 2 == 0) for i in range(n)]


def test_cases_skip_openings_and_the_turn_that_accepted_an_offer() -> None:
    chat = Conversation(conversation_id="a", source="s", domain="chitchat", turns=[
        Turn(role="user", content="hi"), Turn(role="assistant", content="hello"),
        Turn(role="user", content="how are you"), Turn(role="assistant", content="fine, bye"),
        Turn(role="user", content="bye")])
    cases = turn_cases([chat])
    assert [c.left for c in cases] == [False, True]  # the opening is no case
    assert {"a:hello", "u:how", "d:chitchat"} <= set(cases[0].features)
    accepted = chat.model_copy(update={"conversation_id": "b", "outcome": {"end_reason": "accepted"}})
    assert [c.left for c in turn_cases([accepted])] == [False]  # the environment ended it, not the user


def test_features_ignore_the_opening_cue_and_bin_the_turn_number() -> None:
    names = features("Hello there!", OPENING_CUE, 0, None)
    assert not any(n.startswith("a:") for n in names)
    assert {"u:hello", "u:there", "u:!", "n:0", "d:?"} <= set(names)
    assert "n:>20" in features("x", "y", 40, "chitchat")


def test_it_learns_where_real_users_leave_at_their_rate() -> None:
    model = fit_leave_model(_corpus(200, 0), _corpus(60, 1), LeaveSettings(min_count=2))
    assert model is not None
    info = model.info
    assert info["val_auc"] > 0.9  # the goodbye after the agent's goodbye is what marks a leave
    assert info["val_mean_probability"] == pytest.approx(info["val_leave_rate"], abs=0.05)  # calibrated
    bye = model.probability("ok bye!", "i have to run, nice talking to you", 5, "chitchat")
    mid = model.probability("mostly reading", "what do you do for fun?", 2, "chitchat")
    assert bye > 0.5 > mid
    assert model.probability("ok bye!", "i have to run, nice talking to you", 0, "chitchat") == 0.0


def test_nothing_to_learn_gives_no_model() -> None:
    rng = random.Random(0)
    staying = [_chat(i, rng, leaves=False) for i in range(5)]
    for conv in staying:
        conv.turns.append(Turn(role="assistant", content="anyway"))  # every chat ends on the agent
    assert fit_leave_model(staying) is None


def test_saved_model_gives_the_same_probabilities(tmp_path: Path) -> None:
    model = fit_leave_model(_corpus(80, 2), settings=LeaveSettings(min_count=2))
    assert model is not None
    model.save(tmp_path / "leave.json")
    again = LeaveModel.load(tmp_path / "leave.json")
    cases = [("ok bye!", "nice talking to you", 4, "chitchat"), ("the hobbit", "any favourite?", 3, None)]
    for args in cases:
        assert again.probability(*args) == pytest.approx(model.probability(*args), abs=1e-4)
    data = json.loads((tmp_path / "leave.json").read_text())
    (tmp_path / "old.json").write_text(json.dumps({**data, "version": 0}))
    with pytest.raises(ValueError, match="old.json: leave model version 0"):
        LeaveModel.load(tmp_path / "old.json")


def test_settings_are_checked_and_draws_are_stable() -> None:
    with pytest.raises(ValueError, match="sim_sft.leave.c"):
        LeaveSettings(c=0)
    draws = [uniform(0, "user:chitchat:3:2", "leave") for _ in range(2)]
    assert draws[0] == draws[1] and 0.0 <= draws[0] < 1.0
    assert uniform(1, "user:chitchat:3:2", "leave") != draws[0]
