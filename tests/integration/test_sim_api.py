"""The UserSimulator API on a tiny trained simulator: the UserSide protocol, batching, history,
the assistant baseline, and the log-likelihood used for perplexity."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sim_support import tiny_base, tiny_simulator

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.base import SessionSpec, UserSide
from mimesis_rl.simulator.api import UserSimulator, load_simulator
from mimesis_rl.simulator.format import OPENING_CUE

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


def test_sessions_batched_equal_one_at_a_time(trained: tuple[Path, Path]) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu", batch_size=8)
    assert isinstance(sim, UserSide)
    sessions = sim.start(_specs(3))
    openings = sim.opening(sessions)
    replies = sim.respond(sessions, ["What colour do you like?", "Hello!", "Anything else?"])
    assert len(openings) == len(replies) == 3
    for session, first, second in zip(sessions, openings, replies, strict=True):
        assert "<think>" not in first.message and "</think>" not in second.message
        roles = [m["role"] for m in session.messages]
        if not first.ended and first.message:
            assert roles[:4] == ["system", "user", "assistant", "user"]
            assert session.messages[1]["content"] == OPENING_CUE
        assert "Buy a waterproof jacket." in session.messages[0]["content"]
    # Left padding and length-sorted batches must not change what a session says or whose it is:
    # greedy batch == each session alone.
    alone = UserSimulator.load(folder, device="cpu", batch_size=1)
    for i, spec in enumerate(_specs(3)):
        single = alone.start([spec])
        assert alone.opening(single)[0].message == openings[i].message
    assert sim.stats.total == 6


def test_rejected_output_ends_the_session_with_a_reason(trained: tuple[Path, Path]) -> None:
    _, folder = trained
    sim = UserSimulator.load(folder, device="cpu")
    # Force output that can only be rejected: nothing after the reasoning.
    sim.generate = lambda prompts: ["<think>I will say nothing</think>" for _ in prompts]  # type: ignore[method-assign]
    reply = sim.opening(sim.start(_specs(1)))[0]
    assert reply.ended and reply.message == "" and reply.meta["error"] == "empty_message"
    assert sim.stats.rejected["empty_message"] == 1


def test_assistant_baseline_and_sft_only_share_the_api(trained: tuple[Path, Path]) -> None:
    base, folder = trained
    assistant = load_simulator("assistant", base_model=base, device="cpu")
    assert assistant.manifest.kind == "prompted"
    sessions = assistant.start(_specs(2))
    assert "role-playing a user" in sessions[0].messages[0]["content"]
    assert "<think>" not in sessions[0].messages[0]["content"]
    assert len(assistant.opening(sessions)) == 2
    sft_only = load_simulator("sft-only", sft_dir=folder, device="cpu")
    assert sft_only.name == "sft-only" and sft_only.manifest.kind == "lora"
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
