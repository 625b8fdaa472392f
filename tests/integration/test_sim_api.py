"""The one simulator runtime (`UserSimulator`) on a tiny trained simulator: the UserSide protocol,
batch invariance, the forced `<think>`, re-sampling of unusable turns, role breaks, sessions that end
with a reason instead of an empty turn, trimming, the assistant baseline and the log-likelihood."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sim_support import tiny_base, tiny_simulator

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.actions import accept_from_text
from mimesis_rl.envs.protocols import SessionSpec, UserSide
from mimesis_rl.models.inference import Generation
from mimesis_rl.simulator.build import load_simulator
from mimesis_rl.simulator.format import OPENING_CUE, THINK_OPEN
from mimesis_rl.simulator.leaving import LeaveModel
from mimesis_rl.simulator.runtime import UserSimulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sim-api")
    base = tiny_base(root / "base")
    return base, tiny_simulator(base, root / "simulator")


def _specs(n: int) -> list[SessionSpec]:
    goal = GoalCard(text="Buy a waterproof jacket.", slots={"color": "green", "budget": 120},
                    private=["budget"])
    moods = ["in a real hurry today, typing on a phone", "calm", "annoyed"]  # unequal prompt lengths
    return [SessionSpec(goal=goal, domain="shopping", persona={"age": f"{20 + i}", "mood": moods[i % 3]},
                        seed=i) for i in range(n)]


class Cut(str):
    """A scripted output whose reasoning the guard closed mid-sentence (`cut_mid_sentence`)."""


class Scripted:
    """Stands in for the model's sampler only: each round answers the next scripted texts, as tokens.

    A round is what the runtime hands the runner at once: first its turns, then the follow-ups
    (re-samples, `</think>` continuations) their outcomes asked for, and so on. Everything the runtime
    does with a sample (forced prefix, parsing, role-break checks, re-sampling, session bookkeeping)
    runs for real; the runner's own generation is tested in test_rollout_* and test_generation_engine.
    """

    def __init__(self, sim: UserSimulator, outputs: list[list[str]]) -> None:
        self.sim, self.outputs, self.calls = sim, list(outputs), []
        sim.runner.stream = self.stream  # type: ignore[method-assign]

    def stream(self, items, on_finish) -> None:  # noqa: ANN001
        tok = self.sim.runner.tokenizer
        eot = self.sim.runner.chat.end_of_turn_id
        items, first = list(items), 0
        while items:
            self.calls.append(([i[0] for i in items], [i[1] for i in items], items[0][3]))
            texts = self.outputs.pop(0)
            gens = [Generation(token_ids=[*tok.encode(str(t), add_special_tokens=False), eot], logprobs=[],
                               stopped=True, forced_close=isinstance(t, Cut),
                               cut_mid_sentence=isinstance(t, Cut)) for t in texts]
            follow = [on_finish(first + k, gen) for k, gen in enumerate(gens)]
            first += len(items)
            items = [f for f in follow if f is not None]


def test_sessions_batched_equal_one_at_a_time(trained: tuple[Path, Path]) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu", batch_size=8)
    assert isinstance(sim, UserSide)
    sessions = sim.start(_specs(3))
    openings = sim.opening(sessions)
    replies = sim.respond(sessions, ["What colour do you like?", "Hello!", "Anything else?"])
    assert len(openings) == len(replies) == 3
    for session, first, second in zip(sessions, openings, replies, strict=True):
        for turn in (first, second):  # a valid message, or the session ended with its reason
            assert "<think>" not in turn.message and "</think>" not in turn.message
            assert turn.message or (turn.ended and turn.meta["end_reason"])
        assert session.messages[1]["content"] == OPENING_CUE
        assert "Buy a waterproof jacket." in session.messages[0]["content"]
    # Padding, KV reuse and length-sorted batches must not change what a session says:
    # each session alone gives the same turns (seeded per-row sampling).
    alone = UserSimulator.load(folder, device="cpu", batch_size=1)
    for i, spec in enumerate(_specs(3)):
        single = alone.start([spec])
        first = alone.opening(single)[0]
        assert (first.message, first.ended) == (openings[i].message, openings[i].ended)
    assert sim.stats.turns == 3 + sum(not o.ended for o in openings)


def test_format_is_forced_and_unusable_turns_are_resampled_or_end_the_session(trained) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu")
    sim.runner.sampling = sim.sampling.__class__(max_new_tokens=24, do_sample=True, max_retries=1,
                                                 retry_temperature_step=0.5)
    script = Scripted(sim, [
        # opening: session 0 clean; session 1 breaks the role, then its re-sample is fine
        ["I need a jacket.</think>hey, looking for a jacket", "Be helpful.</think>How can I help you today?"],
        ["Stay the user.</think>hi! jacket shopping"],
        # reply: session 0 empty twice -> ends with the reason; session 1 leaves normally
        ["nothing to say</think>", "Done here.</think>ok thanks, bye [END_CONVERSATION]"],
        ["still nothing</think>"],
    ])
    sessions = sim.start(_specs(2))
    first = sim.opening(sessions)
    think = sim.runner.tokenizer.encode(THINK_OPEN, add_special_tokens=False)
    assert all(ctx[-len(think):] == think for ctx in script.calls[0][0])  # the prompt ends in <think>
    assert [r.message for r in first] == ["hey, looking for a jacket", "hi! jacket shopping"]
    assert first[0].reasoning == "I need a jacket."
    assert sim.stats.role_breaks["offers_help"] == 1
    assert script.calls[1][1][0].endswith(":1")  # the re-sample used a fresh seed key
    assert script.calls[0][2].temperature == 1.0 and script.calls[1][2].temperature == 1.5  # and ran hotter
    second = sim.respond(sessions, ["What is your budget?", "Here is our best jacket."])
    assert second[0].ended and second[0].message == ""
    assert second[0].meta["end_reason"] == "invalid_turn:empty_message"
    assert second[1].ended and second[1].message == "ok thanks, bye" and sessions[1].end_reason == "user_left"
    assert sim.stats.failed["empty_message"] == 1 and sim.stats.turns == 4
    # An ended session is never asked again: its next reply is an ended one, with no generation.
    calls = len(script.calls)
    assert sim.respond(sessions[:1], ["Hello?"])[0].ended and len(script.calls) == calls
    metrics = sim.stats.as_metrics()
    assert metrics["parse.failed_turn_rate"] == pytest.approx(1 / 4)
    assert metrics["parse.role_break_rate"] > 0


def test_a_user_never_leaves_on_its_opening_turn_nor_says_its_card_back(trained) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu")
    sim.runner.sampling = sim.sampling.__class__(max_new_tokens=24, do_sample=True, max_retries=1)
    script = Scripted(sim, [
        # opening: session 0 leaves at once, then opens properly; session 1 recites its card, then speaks
        ["Done.</think>ok that is all for now [END_CONVERSATION]",
         "Say the card.</think>First think privately, then write only your message"],
        ["Start simple.</think>hi, I need a jacket", "Keep it short.</think>jacket please"],
        # later turns may leave: nothing is re-sampled; reasoning that was only the end marker: re-sampled
        ["Enough.</think>ok bye [END_CONVERSATION]", "[END_CONVERSATION]</think>green, thanks"],
        ["Green it is.</think>green, thanks"],
    ])
    sessions = sim.start(_specs(2))
    first = sim.opening(sessions)
    assert [r.message for r in first] == ["hi, I need a jacket", "jacket please"]
    assert not any(r.ended for r in first)
    assert sim.stats.opening_leaves == 1 and sim.stats.role_breaks["echoes_card"] == 1
    second = sim.respond(sessions, ["Which colour?", "Which colour?"])
    assert second[0].ended and second[0].message == "ok bye" and len(script.calls) == 4
    assert second[1].reasoning == "Green it is." and sim.stats.rejected["empty_reasoning"] == 1
    metrics = sim.stats.as_metrics()
    assert metrics["parse.opening_leave_rate"] == pytest.approx(1 / 7)
    # The stateless path (evaluation, serve) keeps the same rule for answers to the opening cue.
    Scripted(sim, [["Bye.</think>nothing to say [END_CONVERSATION]"], ["Hm.</think>hey there"]])
    card = sim.start(_specs(1))[0].messages[0]
    assert sim.reply([[card, {"role": "user", "content": OPENING_CUE}]])[0].message == "hey there"


def test_the_learned_leave_model_may_end_a_valid_turn_but_never_the_opening(trained) -> None:
    _, folder = trained
    assert (folder / "leave.json").exists()  # sim_sft fits it beside the adapter; load() picks it up
    assert UserSimulator.load(folder, device="cpu").leave_model is not None
    sim = UserSimulator.load(folder, device="cpu", leave_model=LeaveModel(weights={}, bias=30.0))  # P = 1
    Scripted(sim, [["Hi.</think>hi, I need a jacket"], ["Ok.</think>green please"]])
    sessions = sim.start(_specs(1))
    assert not sim.opening(sessions)[0].ended
    reply = sim.respond(sessions, ["Which colour?"])[0]
    assert reply.ended and reply.message == "green please" and reply.meta["left_by"] == "leave_model"
    assert sessions[0].end_reason == "user_left" and sim.stats.as_metrics()["parse.learned_leave_rate"] == 0.5
    # P = 0 and the stateless path: the model's own end marker still ends a turn, nothing else does.
    never = UserSimulator.load(folder, device="cpu", leave_model=LeaveModel(weights={}, bias=-30.0))
    Scripted(never, [["Ok.</think>green please"], ["Done.</think>bye [END_CONVERSATION]"]])
    card = never.start(_specs(1))[0].messages[0]
    prompt = [card, {"role": "user", "content": OPENING_CUE}, {"role": "assistant", "content": "hi"},
              {"role": "user", "content": "Which colour?"}]
    assert [never.reply([prompt])[0].ended, never.reply([prompt])[0].ended] == [False, True]


def test_a_third_verbatim_copy_in_a_row_is_resampled_and_a_stuck_user_leaves(trained) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu", leave_model=None)  # no learned leaving in this dialogue
    sim.runner.sampling = sim.sampling.__class__(max_new_tokens=24, do_sample=True, max_retries=1)
    Scripted(sim, [
        ["Hm.</think>green jacket", "Hm.</think>hello?"],
        ["Again.</think>Green  Jacket", "Again.</think>hello?"],
        ["Third.</think>green jacket", "Third.</think>hello?"],  # both would be a third copy
        ["New.</think>ok, a green one under 120", "Still.</think>HELLO?"],  # session 1 is stuck
    ])
    sessions = sim.start(_specs(2))
    sim.opening(sessions)
    sim.respond(sessions, ["Which colour?", "Hi?"])
    third = sim.respond(sessions, ["Which colour again?", "Hi??"])
    assert third[0].message == "ok, a green one under 120" and not third[0].ended
    assert third[1].ended and third[1].meta["end_reason"] == "invalid_turn:repeated_turn"
    assert sim.stats.repeats == 3 and sim.stats.as_metrics()["parse.repeat_rate"] == pytest.approx(3 / 8)
    # The stateless path reads the same rule off the prompt's own past turns.
    Scripted(sim, [["Loop.</think>hello?"], ["Fresh.</think>is anyone there"]])
    assert sessions[1].messages[-1] == {"role": "user", "content": "Hi??"}
    assert sim.reply([sessions[1].messages])[0].message == "is anyone there"


def test_a_turn_that_contradicts_the_goal_card_is_resampled_and_never_ends_the_session(trained) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu")
    sim.runner.sampling = sim.sampling.__class__(max_new_tokens=24, do_sample=True, max_retries=1)
    Scripted(sim, [
        ["Budget.</think>I can spend $200 on it"],  # the card's budget is 120
        ["Budget.</think>I can spend up to $120"],
        ["Hm.</think>my budget is 300"],
        ["Hm.</think>As an AI I can't say"],  # the re-sample is worse: the first is delivered, counted
    ])
    sessions = sim.start(_specs(1))
    assert sim.opening(sessions)[0].message == "I can spend up to $120"
    second = sim.respond(sessions, ["And your budget?"])[0]
    assert second.message == "my budget is 300" and not second.ended and not sessions[0].ended
    assert sim.stats.contradicting == 2 and sim.stats.contradictions["budget"] == 2
    assert sim.stats.contradictions_delivered == 1 and sim.stats.failed == {}
    # Outside the task environments (no goal slots: chit-chat) nothing is checked.
    Scripted(sim, [["Hm.</think>I can spend $200 on it"]])
    free = sim.start([SessionSpec(goal=GoalCard(text="Chat."), domain="chitchat")])
    assert sim.opening(free)[0].message == "I can spend $200 on it"


def test_a_message_against_its_own_verdict_is_resampled_when_the_reasoning_decides(trained) -> None:
    _, folder = trained
    over = "They offer $300; I'd pay at most $120, so $300 is over my limit: I'll counter.</think>"
    sim = UserSimulator.load(folder, device="cpu", leave_model=None, decide_by_reasoning=True)
    sim.runner.sampling = sim.sampling.__class__(max_new_tokens=24, do_sample=True, max_retries=1)
    Scripted(sim, [
        ["Hi.</think>hi, I need a green jacket"],
        [over + "Deal, I will take it!"],  # the message accepts what its own verdict turned down
        [over + "No, that is too much for me."],
        [over + "Deal, I will take it!"],
        [over + "Deal, I will take it!"],  # every sample does it: the first is delivered, counted
    ])
    sessions = sim.start(_specs(1))
    sim.opening(sessions)
    first = sim.respond(sessions, ["I can do $300."])[0]
    assert first.message == "No, that is too much for me." and accept_from_text(first.message) is False
    second = sim.respond(sessions, ["$300, final."])[0]
    assert second.message == "Deal, I will take it!" and not sessions[0].ended
    assert sim.stats.verdict_contradicting == 3 and sim.stats.verdict_contradictions_delivered == 1
    assert sim.stats.as_metrics()["parse.verdict_contradictions_delivered"] == 1.0
    # A simulator that decides by its message alone is not checked.
    sim.decide_by_reasoning = False
    Scripted(sim, [[over + "Deal, I will take it!"]])
    assert sim.respond(sessions, ["$300?"])[0].message == "Deal, I will take it!"
    assert sim.stats.verdict_contradicting == 3


def test_long_dialogues_drop_the_oldest_exchanges_and_keep_the_card(trained) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu", leave_model=None)  # no learned leaving in this dialogue
    card_ids = sim.runner.chat.prompt_ids([{"role": "system", "content": sim.card(_specs(1)[0])}])
    window = len(card_ids) + 260  # room for the card and a few exchanges, not for all of them
    sim.max_context_tokens = window
    sim.runner.sampling = sim.sampling.__class__(max_new_tokens=16, do_sample=False)
    rounds = 6
    Scripted(sim, [[f"turn {i}</think>answer number {i} about the jacket"] for i in range(rounds + 1)])
    sessions = sim.start(_specs(1))
    sim.opening(sessions)
    for i in range(rounds):
        reply = sim.respond(sessions, [f"question {i}: tell me more about what you want"])[0]
        assert not reply.ended
        context = sessions[0].track.context
        assert len(context) <= window - 16
        assert context[: len(card_ids) - 10] == card_ids[: len(card_ids) - 10]  # the card stays on top
    text = sim.runner.tokenizer.decode(sessions[0].track.context)
    assert "question 0" not in text and f"question {rounds - 1}" in text  # the oldest went, the newest stayed
    assert len(sessions[0].messages) == 2 + 2 * (rounds + 1) - 1  # the full history is still recorded


def test_assistant_baseline_and_sft_only_share_the_api(trained: tuple[Path, Path]) -> None:
    base, folder = trained
    assistant = load_simulator("assistant", base_model=base, device="cpu")
    assert assistant.manifest is not None and assistant.manifest.kind == "prompted"
    assert assistant.think_ids == []  # the baseline never learned the format: no forced <think>
    sessions = assistant.start(_specs(2))
    assert "role-playing a user" in sessions[0].messages[0]["content"]
    assert "<think>" not in sessions[0].messages[0]["content"]
    assert len(assistant.opening(sessions)) == 2
    sft_only = load_simulator("sft-only", sft_dir=folder, device="cpu")
    assert sft_only.name == "sft-only" and sft_only.manifest is not None and sft_only.manifest.kind == "lora"
    with pytest.raises(ValueError, match="SFT simulator folder"):
        load_simulator("sft-only")
    with pytest.raises(FileNotFoundError):
        UserSimulator.load(folder.parent / "missing", device="cpu")


def test_message_nll_scores_only_the_message(trained: tuple[Path, Path]) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu")
    prompt = sim.start(_specs(1))[0].messages + [{"role": "user", "content": OPENING_CUE}]
    (nll, n), (nll_long, n_long) = sim.message_nll([prompt, prompt], ["hi", "hi there, I need a jacket"],
                                                   ["I want a jacket.", "I want a jacket."])
    assert n == len(sim.tokenizer.encode("hi", add_special_tokens=False))
    assert n_long > n and nll_long > nll > 0
    assert math.isfinite(nll / n)


def test_sim_eval_runs_on_casino_test_split(trained: tuple[Path, Path], casino_dir: Path,
                                            tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from mimesis_rl.cli import app

    base, folder = trained
    data = tmp_path / "casino_test.jsonl"
    runner = CliRunner()
    ingest = runner.invoke(app, ["data", "ingest", "--adapter", "casino", "--input",
                                 str(casino_dir / "casino_test.json"), "--output", str(data)])
    assert ingest.exit_code == 0, ingest.output
    result = runner.invoke(app, ["sim", "eval", "--model", str(folder), "--data", str(data),
                                 "--baseline", "assistant", "--base-model", str(base), "--max-turns", "30",
                                 "--labeler", "rules", "--embedding", "hashing", "--device", "cpu",
                                 "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output[result.output.index("{"):])
    assert printed["bad_records"] == 0
    for row in printed["simulators"].values():
        assert 0 < row["turns"] <= 40 and 0.0 <= row["fidelity_index"] <= 100.0


def test_a_reasoning_closed_mid_sentence_is_resampled_and_delivered_only_as_a_last_resort(trained) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu")
    sim.runner.sampling = sim.sampling.__class__(max_new_tokens=24, do_sample=True, max_retries=1)
    script = Scripted(sim, [
        [Cut("I want the green one because it is</think>g green one please"), Cut("Cut.</think>hm")],
        ["I want green.</think>the green one please", Cut("Still cut</think>ok then")],
    ])
    replies = sim.opening(sim.start(_specs(2)))
    assert len(script.calls) == 2 and script.calls[1][1][0].endswith(":1")  # re-sampled, fresh seed
    assert replies[0].message == "the green one please" and replies[0].reasoning == "I want green."
    assert replies[1].message == "hm" and "closed_mid_sentence" in replies[1].meta["repairs"]  # the first
    assert sim.stats.cut_delivered == 1 and sim.stats.repaired["closed_mid_sentence"] == 3
    # of the two delivered turns, the fallback's reasoning was closed by the budget guard
    assert sim.stats.delivered == 2 and sim.stats.closed_at_budget == 1
    assert sim.stats.as_metrics()["parse.closed_at_budget_turn_rate"] == 0.5
