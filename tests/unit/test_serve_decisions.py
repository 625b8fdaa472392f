"""The service reports the decision its user took on a pending proposal (`accept`), as the environment
reads it: a scripted user's, or a simulator's that decides by its reasoning."""

from __future__ import annotations

import random

from fastapi.testclient import TestClient

from mimesis_rl.envs.registry import make_env, scripted_user
from mimesis_rl.serve import ServeSettings, create_app
from mimesis_rl.serve.batcher import parsed_to_reply
from mimesis_rl.simulator.format import parse_output

KEY = "test-key-0123456789abcdef"


def test_a_session_reply_carries_the_users_decision() -> None:
    goal = make_env("bargain").sample(random.Random(5)).goal  # the buyer pays at most its reservation
    limit = int(goal.slots["reservation"])
    app = create_app(scripted_user("bargain", "cooperative"), ServeSettings(model="m", api_keys=(KEY,)),
                     environ={})
    offer = 'I can pay ${p}. <action>{{"type": "offer", "price": {p}}}</action>'
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as client:
        opened = client.post("/v1/sessions", json={"domain": "bargain", "goal": goal.model_dump(), "seed": 1})
        assert opened.status_code == 201 and "accept" not in opened.json()  # nothing proposed yet
        sid = opened.json()["session_id"]
        url = f"/v1/sessions/{sid}/messages"
        over = client.post(url, json={"message": offer.format(p=limit + 200)}).json()
        assert over["accept"] is False and not over["ended"]  # over its limit: turned down
        within = client.post(url, json={"message": offer.format(p=limit // 2)}).json()  # a bargain
        assert within["accept"] is True


def test_a_stateless_reply_decides_by_reasoning_only_for_a_simulator_that_does() -> None:
    turn = parse_output("<think>I'll take it: they offer $420; I'd pay at most $500.</think>Sounds fair.")
    assert parsed_to_reply(turn).meta == {}  # the message says neither: the environment reads a no
    decided = parsed_to_reply(turn, decide_by_reasoning=True)
    assert decided.meta["accept"] is True and decided.meta["decided_by"] == "reasoning"
    said = parse_output("<think>I'll take it: they offer $420.</think>No, that's too much.")
    assert "accept" not in parsed_to_reply(said, decide_by_reasoning=True).meta  # its words stand
