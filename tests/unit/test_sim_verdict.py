"""A reply's own verdict (`verdicts.own_verdict`) and the runtime's opt-in `reasoned_decision`: a
reply whose message says neither yes nor no decides by the verdict its reasoning reached."""

from __future__ import annotations

import pytest

from mimesis_rl.envs.actions import accept_from_text, reply_accepts
from mimesis_rl.envs.protocols import UserReply
from mimesis_rl.simulator.env_data import decision_dialogues
from mimesis_rl.simulator.format import ParsedTurn
from mimesis_rl.simulator.verdicts import own_verdict, reasoned_decision, turn_meta


def test_every_card_users_decision_states_the_verdict_its_message_says() -> None:
    turns = [t for c in decision_dialogues(["bargain", "campsite", "travel", "content"], 10, seed=3)
             for t in c.turns if t.role == "user" and t.meta.get("decision") == "proposal"]
    assert len(turns) >= 12
    verdicts = [own_verdict(t.reasoning) for t in turns]
    assert None not in verdicts and True in verdicts and False in verdicts
    assert all(v == (accept_from_text(t.content) is True) for v, t in zip(verdicts, turns, strict=True))


@pytest.mark.parametrize(
    ("reasoning", "message", "verdict", "decided"),
    [
        # the simulator's own turns (sim_env transcripts): the verdict reached, the message undecided
        ("They offer $691; I'd pay at most $691, so $691 is within my limit: I'll take it.",
         "I'm happy with the price.", True, True),
        ("They offer $180; I'd pay at most $180, so $180 is within my limit.", "Good. What's your price?",
         True, True),
        ("They offered me $494; I'd like to spend $433, so $494 is over my $433 limit.",
         "I'll make it down to my next opportunity.", False, False),
        # a message that says yes or no keeps its own reading
        ("They offer $765; I'd pay at most $695, so $765 is over my $695 limit.", "Deal!", False, True),
        ("They offer $180; I'd pay at most $180, so $180 is within my limit.", "No, thanks.", True, False),
        ("That's 19 points, and I need at least 20, so 19 is short of it: I'll counter.",
         "No, that leaves us short.", False, False),
        ("They offer $400; I'd pay at most $420, so $400 is within my limit, but I can still get it cheaper: "
         "I'll counter at $380.", "Hmm.", False, False),
        # verdict first (`decision_windows.act_first`): the act it opens with decides
        ("I'll take it: they offer $420; I'd pay at most $500, so", "Sounds good to me.", True, True),
        ("I'll counter at $380: they offer $400", "Hmm, let me think.", False, False),
        ("I'll book it: they offer Casa Blanca for 4 people on friday", "Thanks.", True, True),
        # no verdict reached: the message alone decides
        ("They'll keep 0 food, 2 water, 2 firewood; we don't need much firewood.", "Sounds nice.", None,
         False),
    ],
)
def test_a_reply_that_says_neither_decides_by_its_reasoning(reasoning: str, message: str,
                                                            verdict: bool | None, decided: bool) -> None:
    assert own_verdict(reasoning) is verdict
    meta = reasoned_decision(reasoning, message)
    if accept_from_text(message) is None and verdict is not None:
        assert meta == {"accept": verdict, "decided_by": "reasoning"}
    else:
        assert meta == {}
    assert reply_accepts(UserReply(message, reasoning, meta=meta)) is decided


def test_a_turns_meta_keeps_its_repairs_and_carries_the_reasoned_decision_only_when_asked() -> None:
    turn = ParsedTurn("They offer $420; I'd pay at most $500, so $420 is within my limit: I'll take it.",
                      "Let me see the photos.", False, repairs=("closed_think",))
    assert turn_meta(turn) == {"repairs": ["closed_think"]}
    assert turn_meta(turn, decide_by_reasoning=True) == {"repairs": ["closed_think"], "accept": True,
                                                         "decided_by": "reasoning"}
    assert turn_meta(ParsedTurn("Not sure yet.", "Hmm.", False), decide_by_reasoning=True) == {}
