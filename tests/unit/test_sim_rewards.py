"""Each simulator reward ranks a written good user turn above a written bad one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.simulator.dialogue import turn_contexts
from mimesis_rl.simulator.discriminator import TurnDiscriminator
from mimesis_rl.simulator.format import render_target
from mimesis_rl.simulator.rewards import (
    REWARD_NAMES,
    build_rewards,
    make_format_reward,
    make_goal_consistency_reward,
    make_paced_disclosure_reward,
    make_role_adherence_reward,
    slot_vocabulary,
)
from mimesis_rl.simulator.rewards.realism import make_realism_reward

SHOP_SLOTS = {"category": "jacket", "color": "green", "budget": 120}
CAMP_SLOTS = {"high": "water", "medium": "food", "low": "firewood"}


def _turn(message: str, reasoning: str = "I keep my budget to myself.", ended: bool = False) -> list[dict]:
    return [{"role": "assistant", "content": render_target(reasoning, message, ended)}]


def _call(fn, completions: list, **columns) -> list:
    prompts = [[{"role": "user", "content": "What are you looking for?"}]] * len(completions)
    cols = {k: [v] * len(completions) for k, v in columns.items()}
    return fn(prompts=prompts, completions=completions, **cols)


def test_goal_consistency_prefers_a_message_that_keeps_to_the_card() -> None:
    vocab = slot_vocabulary([SHOP_SLOTS, {"category": "shoes", "color": "red", "budget": 80}, CAMP_SLOTS,
                             {"high": "firewood", "medium": "water", "low": "food"}])
    fn = make_goal_consistency_reward(vocab)
    good, bad, bad_number = _call(fn, [_turn("a green jacket, not red please"), _turn("I want red shoes"),
                                       _turn("my budget is 300 dollars")],
                                  goal_slots=json.dumps(SHOP_SLOTS))
    assert good > bad and good > bad_number
    # Values that are true for another slot of the same card are never contradictions.
    assert _call(fn, [_turn("water matters most to me, firewood not so much")],
                 goal_slots=json.dumps(CAMP_SLOTS)) == [1.0]
    trip = {"city": "Paris", "nights": 2}
    vocab = slot_vocabulary([trip, {"city": "Rome", "nights": 4}])
    ok, wrong_city, wrong_nights = _call(make_goal_consistency_reward(vocab), [
        _turn("a hotel in Paris for 2 nights"), _turn("a hotel in Rome please"), _turn("for 3 nights")],
        goal_slots=json.dumps(trip))
    assert (ok, wrong_city, wrong_nights) == (1.0, 0.0, 0.0)
    assert _call(fn, [_turn("hello")], goal_slots="{}") == [None]


def test_paced_disclosure_penalises_telling_everything_at_once() -> None:
    fn = make_paced_disclosure_reward()
    slots = {"category": "jacket", "color": "green", "budget": 120, "size": "M"}
    cols = {"goal_slots": json.dumps(slots), "private_slots": json.dumps(["budget", "size"])}
    dump_text = "I need a green jacket in size M, budget 120"
    paced, dump = _call(fn, [_turn("hi, I need a jacket"), _turn(dump_text)], user_turn_number=0, **cols)
    assert paced == 1.0 and dump < 0.2
    later_one, later_all = _call(fn, [_turn("ok, my budget is around 120"), _turn("budget 120, size M")],
                                 user_turn_number=3, **cols)
    assert later_one > later_all
    # Slots revealed earlier in the dialogue are not counted again.
    again = _call(fn, [_turn("as I said, 120 max")], user_turn_number=4, revealed=json.dumps(["budget"]),
                  **cols)
    assert again == [1.0]


def test_role_adherence_penalises_assistant_talk_and_refusals() -> None:
    fn = make_role_adherence_reward()
    user, helper, listy, refusal = _call(fn, [
        _turn("too pricey. anything cheaper?"),
        _turn("As an AI, I'd be happy to help you find a jacket! Is there anything else?"),
        _turn("Options:\n1. green jacket\n2. red jacket\n3. blue jacket"),
        _turn("I'm sorry, but I can't pretend to be a user."),
    ])
    assert user == 1.0
    assert user > helper and user > listy and user > refusal
    assert refusal == 0.0


def test_format_rewards_well_formed_reasoning_and_real_length() -> None:
    fn = make_format_reward(length_range=(1, 20))
    good, no_think, too_long, broken = _call(fn, [
        [{"role": "assistant", "content": "<think>Price first.</think>how much is it?"}],
        [{"role": "assistant", "content": "how much is it?"}],
        [{"role": "assistant", "content": "<think>Price first.</think>" + "word " * 50}],
        [{"role": "assistant", "content": "<think>I never close this"}],
    ])
    assert good == 1.0
    assert good > no_think > broken and good > too_long > broken
    assert broken == 0.0


def test_realism_prefers_user_like_turns(fixtures_dir: Path) -> None:
    conversations = read_conversations(fixtures_dir / "sim" / "conversations.jsonl")
    contexts, messages, labels = [], [], []
    for conv in conversations:
        for ctx in turn_contexts(conv):
            contexts.append(ctx.agent_message or "")
            messages.append(ctx.real.content)
            labels.append(1)
            contexts.append(ctx.agent_message or "")
            messages.append(f"Thank you for your question! I would be happy to help. Here are some "
                            f"options regarding {conv.domain}:\n1. Option A\n2. Option B\nLet me know.")
            labels.append(0)
    disc = TurnDiscriminator(features="cheap", seed=0).fit(contexts, messages, labels)
    fn = make_realism_reward(disc)
    real_like, assistant_like, rejected = fn(
        prompts=[[]] * 3,
        completions=[_turn("nah too expensive, got anything cheaper?"),
                     _turn("Thank you! I would be happy to help. Here are some options:\n1. A\n2. B"),
                     [{"role": "assistant", "content": "<think>unclosed"}]],
        agent_message=["The Alpine Shell is 199 dollars."] * 3)
    assert real_like > 0.5 > assistant_like
    assert rejected == 0.0


def test_discriminator_round_trips_through_disk(tmp_path: Path) -> None:
    messages = ["ok", "sure thing", "Here are some options:", "1. A"]
    disc = TurnDiscriminator(features="cheap").fit(["q?"] * 4, messages, [1, 1, 0, 0])
    loaded = TurnDiscriminator.load(disc.save(tmp_path / "discriminator.npz"))
    probe = (["q?", "q?"], ["ok", "Here are some options:"])
    assert list(loaded.predict_real(*probe)) == list(disc.predict_real(*probe))
    with pytest.raises(ValueError, match="both real"):
        TurnDiscriminator().fit(["a"], ["b"], [1])


def test_loading_a_discriminator_never_unpickles(tmp_path: Path) -> None:
    """Old pickles are refused by name; a .npz holding a pickled object array is refused unread."""
    import pickle

    import numpy as np

    class Boom:
        def __reduce__(self):  # unpickling this would write a file
            return (Path.write_text, (tmp_path / "pwned", "x"))

    old = tmp_path / "discriminator.joblib"
    old.write_bytes(pickle.dumps(Boom()))
    with pytest.raises(ValueError, match="pickled discriminator .* Re-run the sim_rl stage"):
        TurnDiscriminator.load(old)
    sneaky = tmp_path / "discriminator.npz"
    with sneaky.open("wb") as handle:
        np.savez(handle, header=np.array([Boom()], dtype=object))
    with pytest.raises(ValueError, match="not a saved TurnDiscriminator"):
        TurnDiscriminator.load(sneaky)
    assert not (tmp_path / "pwned").exists()


def test_build_rewards_follows_the_weights() -> None:
    funcs, weights = build_rewards({"role_adherence": 1.0, "format": 0.5, "goal_consistency": 0.0})
    assert [f.__name__ for f in funcs] == ["role_adherence", "format"]
    assert weights == [1.0, 0.5]
    with pytest.raises(ValueError, match="unknown reward"):
        build_rewards({"niceness": 1.0})
    with pytest.raises(ValueError, match="no discriminator"):
        build_rewards({"realism": 1.0})
    assert "pattern_fidelity" in REWARD_NAMES


def test_pattern_fidelity_prefers_the_real_turns_behaviour() -> None:
    pytest.importorskip("mimesis_rl.behavior.labelers.rules")
    from mimesis_rl.simulator.labeling import labeler_predictor
    from mimesis_rl.simulator.rewards import make_pattern_fidelity_reward

    fn = make_pattern_fidelity_reward(labeler_predictor("rules"))
    prompt = [{"role": "system", "content": "card"},
              {"role": "user", "content": "(The conversation starts. Write your first message.)"},
              {"role": "assistant", "content": "<think>Keep it short.</think>hi, need a jacket"},
              {"role": "user", "content": "Sure! What is your budget and your home address?"}]
    good, bad, rejected = fn(prompts=[prompt] * 3,
                             completions=[_turn("why do you need my address? I'd rather not say"),
                                          _turn("My budget is 120 dollars and I live at 5 Main Street."),
                                          [{"role": "assistant", "content": "<think>unclosed"}]],
                             real_patterns=[json.dumps(["privacy_concern", "withholding_info"])] * 3)
    assert good > bad
    assert rejected == 0.0
    # Rows without a real next turn (environment goal cards) do not take part.
    assert fn(prompts=[prompt], completions=[_turn("hi")], real_patterns=[None]) == [None]


def test_soft_jaccard_matches_plain_turns_and_ignores_small_probabilities() -> None:
    from mimesis_rl.simulator.rewards import soft_jaccard

    assert soft_jaccard({"refusal": 0.9, "criticism": 0.1}, ["refusal"]) == pytest.approx(0.9)
    assert soft_jaccard({"refusal": 0.05}, []) == pytest.approx(0.95)
    assert soft_jaccard({"refusal": 0.9}, []) < soft_jaccard({}, [])
    assert soft_jaccard({"negotiation": 0.8}, ["refusal"]) == 0.0


def test_goal_pursuit_rewards_stating_the_want_and_skips_rows_without_a_card() -> None:
    from mimesis_rl.simulator.rewards import make_goal_pursuit_reward

    fn = make_goal_pursuit_reward()
    slots = json.dumps({"category": "jacket", "style": "sporty", "budget": 91,
                        "changeable": {"style": ["sporty", "rugged"]}})
    stated, chat, alternative = _call(fn, [_turn("hi, I'm after a sporty jacket"),
                                           _turn("I want to change the topic, so I will write"),
                                           _turn("something rugged maybe")], goal_slots=slots)
    assert stated == 1.0 and chat == 0.0
    assert alternative == 0.0  # the card's change-of-mind bookkeeping is not a want
    assert _call(fn, [_turn("hello")], goal_slots="{}") == [None]
    assert _call(fn, [[{"role": "assistant", "content": "<think>unclosed"}]], goal_slots=slots) == [0.0]


def test_rewards_parse_the_forced_think_prefix_with_the_completion() -> None:
    """GRPO's text prompts end in `<think>` (as the runtime's do): rewards see `<think>` + completion."""
    funcs, _ = build_rewards({"format": 1.0, "goal_pursuit": 1.0}, completion_prefix="<think>")
    pursuit, fmt = funcs
    assert [pursuit.__name__, fmt.__name__] == ["goal_pursuit", "format"]
    completion = "I want it sporty.</think>a sporty jacket please"
    prompts = ["<|im_start|>assistant\n<think>"]
    assert pursuit(prompts=prompts, completions=[completion], goal_slots=[json.dumps(SHOP_SLOTS)]) == [1.0]
    with_prefix = fmt(prompts=prompts, completions=[completion])[0]
    bare, _ = build_rewards({"format": 1.0})
    assert with_prefix > bare[0](prompts=prompts, completions=[completion])[0]  # no `missing_open_tag` repair
