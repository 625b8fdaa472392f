"""The rules labeler on clear cases, its dialogue-context features, and labelling files with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mimesis_rl.behavior.context import TurnInContext
from mimesis_rl.behavior.evaluation import evaluate
from mimesis_rl.behavior.gold import load_gold
from mimesis_rl.behavior.labelers.rules import RulesLabeler, read_agent_turn
from mimesis_rl.behavior.labeling import label_file
from mimesis_rl.cli import app
from mimesis_rl.data.jsonl import DataError
from mimesis_rl.data.schema import PATTERN_NAMES, Conversation, GoalCard, Turn


def ctx(user: str, agent: str | None = None, goal: GoalCard | None = None) -> TurnInContext:
    history = (Turn(role="assistant", content=agent),) if agent else ()
    return TurnInContext(text=user, history=history, goal=goal)


@pytest.fixture(scope="module")
def rules() -> RulesLabeler:
    return RulesLabeler()


CASES = [
    ("vague_request", ctx("I want something nice, surprise me.", "What are you looking for?")),
    ("implicit_preference", ctx("My kids are 4 and 7 and I don't drive.", "Any requirements for the hotel?")),
    ("withholding_info", ctx("Let's see what you have first.", "What's your budget?")),
    ("privacy_concern", ctx("Why do you need my date of birth?", "Please give me your date of birth.")),
    ("refusal", ctx("No thanks, I'll pass.", "Would you like to add insurance for $19?")),
    ("criticism", ctx("This is useless, did you even read my message?", "Try restarting the router.")),
    ("pushback", ctx("That's not true, I already tried that.", "Restarting always fixes it.")),
    ("intent_change", ctx("Actually, let's do Madrid instead.", "Your hotel in Lisbon is booked.")),
    (
        "goal_ambiguity",
        ctx("I can't decide, maybe the red one or the blue one.", "Which color would you like?"),
    ),
    ("emotional_expression", ctx("Ugh, I'm so frustrated!!", "Your order is delayed.")),
    ("incomplete_utterance", ctx("window pls", "Window or aisle?")),
    ("negotiation", ctx("Would you do 30 if I take two?", "These are 40 dollars each.")),
    ("follow_up_probe", ctx("What do you mean by cushioned?", "These shoes are very cushioned.")),
]


@pytest.mark.parametrize(("pattern", "context"), CASES, ids=[c[0] for c in CASES])
def test_clear_cases(rules: RulesLabeler, pattern: str, context: TurnInContext) -> None:
    [(names, probs)] = rules.label_contexts([context])
    assert pattern in names, rules.cues(context)
    assert probs[pattern] >= 0.5
    assert set(probs) == set(PATTERN_NAMES)


def test_plain_answers_carry_no_pattern(rules: RulesLabeler) -> None:
    for user, agent in [
        ("It's 5528-1190-A.", "Could you provide your order number?"),
        ("Yes, please book the 7 PM table for two people.", "Shall I book the 7 PM table?"),
        ("I went ice skating with my friends and watched a movie.", "What did you do?"),
    ]:
        [(names, _)] = rules.label_contexts([ctx(user, agent)])
        assert names == (), (user, rules.cues(ctx(user, agent)))


def test_context_decides_withholding_and_refusal(rules: RulesLabeler) -> None:
    deflect = "Not sure, what about you?"
    assert "withholding_info" in rules.label_contexts([ctx(deflect, "Where do you live?")])[0][0]
    assert "withholding_info" not in rules.label_contexts([ctx(deflect, "I love living by the sea.")])[0][0]
    # a bare "no" refuses an offer but only answers a factual question
    assert "refusal" in rules.label_contexts([ctx("nah", "Would you like a spring roll for $4?")])[0][0]
    assert "refusal" not in rules.label_contexts([ctx("nah", "Did it rain there?")])[0][0]


def test_goal_slot_change_strengthens_intent_change(rules: RulesLabeler) -> None:
    goal = GoalCard(text="Transfer 200 to Sam", slots={"amount": 200})
    with_goal = rules.predict_proba([ctx("Wait, make it 150.", "Sending 200 now.", goal)])
    without = rules.predict_proba([ctx("Wait, make it 150.", "Sending 200 now.")])
    k = PATTERN_NAMES.index("intent_change")
    assert with_goal[0, k] > without[0, k] >= 0.5


def test_agent_turn_reading() -> None:
    turn = read_agent_turn("Great choice! Would you like to add a case? What's your email?")
    assert turn.offered and turn.asks_personal and turn.question == "What's your email?"
    assert read_agent_turn("Restarting always fixes it.").is_claim


def test_typos_and_fragments(rules: RulesLabeler) -> None:
    k = PATTERN_NAMES.index("incomplete_utterance")
    probs = rules.predict_proba(
        [
            ctx("I definently want to go, its neihter here nor there"),
            ctx("I don't think that's a good idea at all, honestly."),
            ctx("Hey there!"),
        ]
    )
    assert probs[0, k] >= 0.5 and probs[1, k] < 0.5 and probs[2, k] < 0.5


def test_label_returns_every_user_turn_with_its_index(rules: RulesLabeler) -> None:
    conv = Conversation(
        conversation_id="c",
        source="s",
        domain="d",
        turns=[
            Turn(role="user", content="hi"),
            Turn(role="assistant", content="What's your budget?"),
            Turn(role="user", content="Let's see what you have first."),
            Turn(role="assistant", content="The Pro is $189."),
            Turn(role="user", content="ok"),
        ],
    )
    [labels] = rules.label([conv])
    assert [t.turn_index for t in labels] == [0, 2, 4]
    assert "withholding_info" in labels[1].patterns
    dialogue = rules.predict_dialogues([conv.turns[:3]])
    assert dialogue[0]["withholding_info"] >= 0.5


def test_rules_on_gold_test_split(rules: RulesLabeler) -> None:
    report = evaluate(rules, load_gold(split="test"))
    assert report.n_items >= 200
    assert report.macro_f1 >= 0.5, report.per_pattern  # regression guard; the table is in the README


# --- labelling files ---------------------------------------------------------------------------------------


def _strip_patterns(record: dict) -> dict:
    return {**record, "turns": [{k: v for k, v in t.items() if k != "patterns"} for t in record["turns"]]}


def test_label_file_keeps_every_other_field(tmp_path: Path, fixtures_dir: Path, rules: RulesLabeler) -> None:
    source = fixtures_dir / "label" / "unseen.jsonl"
    out = tmp_path / "out.jsonl"
    stats = label_file(source, out, rules)
    before = [json.loads(line) for line in source.read_text().splitlines()]
    after = [json.loads(line) for line in out.read_text().splitlines()]
    assert [_strip_patterns(r) for r in after] == [_strip_patterns(r) for r in before]
    assert all("patterns" in t for r in after for t in r["turns"] if t["role"] == "user")
    assert all("patterns" not in t for r in after for t in r["turns"] if t["role"] == "assistant")
    assert after[0]["turns"][2]["reasoning"] == before[0]["turns"][2]["reasoning"]
    assert stats.conversations == 3 and stats.user_turns == 8
    assert all(Conversation.model_validate(r) for r in after)


def test_bad_input_names_where_and_writes_nothing(
    tmp_path: Path, fixtures_dir: Path, rules: RulesLabeler
) -> None:
    out = tmp_path / "out.jsonl"
    with pytest.raises(
        DataError, match=r"bad_pattern\.jsonl:2: turns\[1\]\.patterns: .*unknown pattern names"
    ):
        label_file(fixtures_dir / "label" / "bad_pattern.jsonl", out, rules)
    with pytest.raises(DataError, match=r"no_agent\.jsonl:1: turns: no assistant turn"):
        label_file(fixtures_dir / "label" / "no_agent.jsonl", out, rules)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_quarantine_mode(tmp_path: Path, fixtures_dir: Path, rules: RulesLabeler) -> None:
    bad: list[dict] = []
    out = tmp_path / "out.jsonl"
    stats = label_file(
        fixtures_dir / "label" / "bad_pattern.jsonl", out, rules, quarantine=bad, max_bad_share=0.5
    )
    assert stats.quarantined == 1 and len(out.read_text().splitlines()) == 1
    assert bad[0]["line"] == 2 and bad[0]["field"] == "turns[1].patterns"
    with pytest.raises(DataError, match="1 of 2 records are bad"):
        label_file(
            fixtures_dir / "label" / "bad_pattern.jsonl",
            tmp_path / "o2.jsonl",
            rules,
            quarantine=[],
            max_bad_share=0.1,
        )
    assert not (tmp_path / "o2.jsonl").exists()


def test_cli_labels_and_evaluates(tmp_path: Path, fixtures_dir: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "labeled.jsonl"
    result = runner.invoke(
        app,
        [
            "label",
            "--input",
            str(fixtures_dir / "label" / "unseen.jsonl"),
            "--output",
            str(out),
            "--backend",
            "rules",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "labelled 8 user turns in 3 conversations" in result.output
    assert len(out.read_text().splitlines()) == 3

    result = runner.invoke(app, ["label", "eval", "--labeler", "rules"])
    assert result.exit_code == 0, result.output
    assert "| rules | kappa |" in result.output and "macro-F1" in result.output

    result = runner.invoke(
        app,
        [
            "label",
            "--input",
            str(fixtures_dir / "label" / "bad_pattern.jsonl"),
            "--output",
            str(tmp_path / "x.jsonl"),
            "--backend",
            "rules",
        ],
    )
    assert result.exit_code == 1 and "bad_pattern.jsonl:2" in result.output
    assert not (tmp_path / "x.jsonl").exists()

    result = runner.invoke(app, ["label", "--input", str(fixtures_dir / "label" / "unseen.jsonl")])
    assert result.exit_code == 2 and "give --input and --output" in result.output
