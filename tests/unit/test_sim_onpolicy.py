"""On-policy relabelling: the dialogues as another user played them, cut at each decision and ended on
the card user's reply there; windows that train that reply alone; the pool's share."""

from __future__ import annotations

from mimesis_rl.envs.loop import play
from mimesis_rl.envs.registry import make_env, scripted_agent, scripted_user
from mimesis_rl.simulator.decisions import replay
from mimesis_rl.simulator.onpolicy import (
    LAST_TURN_COLUMN,
    kept_whole,
    mixed_pool,
    onpolicy_windows,
    relabelled,
)
from mimesis_rl.simulator.sft_data import fit_window
from mimesis_rl.training.span_weights import last_run_start


def _played(domain: str = "bargain", preset: str = "train_mix") -> list:
    return play(make_env(domain), scripted_agent(domain), scripted_user(domain, preset), [11, 12, 13])


def _episode(conversation_id: str) -> str:
    return conversation_id.removeprefix("env-onpolicy-").rsplit("-at", 1)[0]


def test_each_decision_is_the_played_dialogue_then_the_card_users_reply() -> None:
    states = _played()
    convs = relabelled(states)
    assert {c.turns[-1].meta["decision"] for c in convs} == {"proposal", "question"}
    by_id = {s.episode_id: s for s in states}
    changed = 0
    for conv in convs:
        *context, target = conv.turns
        state = by_id[_episode(conv.conversation_id)]
        played = [t for t in state.trace if t.role != "environment" and t.content.strip()]
        assert [t.content for t in context] == [t.content for t in played[: len(context)]]  # as played
        assert context[-1].role == "assistant" and target.role == "user"
        assert not any(t.meta.get("decision") for t in context)  # its own turns are context only
        sent = [t.content for t in context if t.role == "assistant"]
        _, card = replay("bargain", state.seed, sent)
        assert (target.content, target.reasoning) == (card.message, card.reasoning)
        assert target.meta == {"decision": target.meta["decision"], "ended": False}
        if target.meta["decision"] == "proposal":
            assert ", so " in target.reasoning  # grounded in the card's limit
        changed += len(played) > len(context) and played[len(context)].content != target.content
    assert changed  # train_mix answered otherwise somewhere: the relabel is not a copy


def test_a_message_the_card_user_never_reaches_is_skipped() -> None:
    """Where the card user would have taken a deal (or left) before, the dialogue played on has no
    card decision to learn from, and no cut is made there."""
    states = _played()
    cuts = {(_episode(c.conversation_id), sum(t.role == "assistant" for t in c.turns))
            for c in relabelled(states)}
    unreached = 0
    for state in states:
        sent = [t.content for t in state.trace if t.role == "assistant"]
        for k in range(1, len(sent) + 1):
            if replay("bargain", state.seed, sent[:k])[1] is None:
                unreached += 1
                assert (state.episode_id, k) not in cuts
    assert unreached


def test_windows_train_the_last_reply_and_the_pool_keeps_the_share() -> None:
    convs = relabelled(_played())
    windows = onpolicy_windows(convs, max_behaviours=4, window_turns=6)
    assert len(windows) == len(convs) and all(w[LAST_TURN_COLUMN] for w in windows)
    for window, conv in zip(windows, convs, strict=True):
        assert window["messages"][-1]["role"] == "assistant"  # flipped: the user's reply is the target
        assert conv.turns[-1].content in window["messages"][-1]["content"]
        assert len(window["messages"]) <= 6 + 2  # the card, maybe the agent's cue, the window
    env = [{"messages": [{"role": "system", "content": f"env {i}"}]} for i in range(40)]
    pool = mixed_pool(env, windows, 0.25, seed=0)
    assert len(pool) == 40 and sum(w[LAST_TURN_COLUMN] for w in pool) == 10
    assert all(LAST_TURN_COLUMN in w for w in pool)
    assert mixed_pool(env, windows, 0.0) is env


def test_a_split_off_piece_of_an_onpolicy_window_is_dropped() -> None:
    """`fit_window` splits a long window into pieces; those ending on the simulator's own reply are
    context cut loose, not targets, and go."""
    convs = relabelled(_played())
    longest = max(onpolicy_windows(convs, 4, None), key=lambda w: len(w["messages"]))
    size = lambda messages: sum(len(m["content"]) for m in messages)  # noqa: E731
    halves = fit_window(longest["messages"], size, size(longest["messages"]) - 1)
    pieces = [{**longest, "messages": m} for m in halves]
    assert len(pieces) > 1
    assert kept_whole(pieces, convs) == [pieces[-1]]
    assert pieces[-1]["messages"][-1] == longest["messages"][-1]


def test_the_last_trained_run_is_found() -> None:
    assert last_run_start([-100, 5, 6, -100, -100, 7, 8, -100]) == 5
    assert last_run_start([1, 2, 3]) == 0
    assert last_run_start([-100, -100]) == 0


def test_balanced_relabels_pair_each_proposal_with_the_cards_other_decision() -> None:
    """The scripted agents mostly propose what the card accepts; `balanced` gives every relabelled
    proposal its counterpart after the same played context, so the card's yes and no are even."""
    from mimesis_rl.envs.actions import reply_accepts

    states = _played()
    plain, both = relabelled(states), relabelled(states, balanced=True)
    others = {c.conversation_id.removesuffix("-other"): c
              for c in both if c.conversation_id.endswith("-other")}
    proposals = [c for c in plain if c.turns[-1].meta["decision"] == "proposal"]
    assert proposals and set(others) == {c.conversation_id for c in proposals}
    assert [c for c in both if not c.conversation_id.endswith("-other")] == plain
    by_id = {s.episode_id: s for s in states}
    decided = []
    for conv in proposals:
        other = others[conv.conversation_id]
        assert [t.content for t in other.turns[:-2]] == [t.content for t in conv.turns[:-2]]  # same context
        assert other.turns[-2].content != conv.turns[-2].content
        assert other.turns[-1].meta["decision"] == "proposal"
        seed = by_id[_episode(conv.conversation_id)].seed
        sent = lambda c: [t.content for t in c.turns[:-1] if t.role == "assistant"]  # noqa: E731
        (_, mine), (_, theirs) = replay("bargain", seed, sent(conv)), replay("bargain", seed, sent(other))
        assert theirs.message == other.turns[-1].content
        assert reply_accepts(mine) != reply_accepts(theirs)
        decided += [reply_accepts(mine), reply_accepts(theirs)]
    assert sum(decided) * 2 == len(decided)
