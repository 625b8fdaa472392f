"""Every adapter on small fixtures written in its corpus format, plus the real CaSiNo file when present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimesis_rl.data.adapters import Excluded, get_adapter, known_adapters
from mimesis_rl.data.jsonl import BadRecord, DataError
from mimesis_rl.data.schema import Conversation


@pytest.fixture
def corpora(fixtures_dir: Path) -> Path:
    return fixtures_dir / "corpora"


def split_items(items) -> tuple[dict[str, Conversation], list[BadRecord]]:
    convs: dict[str, Conversation] = {}
    rejects: list[BadRecord] = []
    for item in items:
        if isinstance(item, Conversation):
            assert item.conversation_id not in convs
            convs[item.conversation_id] = item
        else:
            rejects.append(item)
    return convs, rejects


# --- registry -------------------------------------------------------------------------------------


def test_registry_knows_the_three_formats() -> None:
    assert known_adapters() == ["casino", "chitchat", "messages"]


def test_unknown_adapter_lists_known_names() -> None:
    with pytest.raises(DataError, match=r"unknown adapter 'csv'; known adapters: casino, chitchat, messages"):
        get_adapter("csv")


@pytest.mark.parametrize("name", ["chitchat", "casino", "messages"])
def test_missing_input_is_one_clear_error(name: str, tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(DataError, match=rf"{missing}: input file not found \(adapter '{name}'\)"):
        list(get_adapter(name).read(missing))


def test_embedded_only_where_an_adapter_ships_a_corpus() -> None:
    with pytest.raises(DataError, match="ships no embedded corpus"):
        list(get_adapter("casino").read("embedded"))


def test_unknown_option_is_rejected(corpora: Path) -> None:
    with pytest.raises(DataError, match=r"unknown options \['domain'\]"):
        list(get_adapter("chitchat").read(corpora / "chitchat_small.json", domain="x"))


def test_folder_input_reads_matching_files_in_order(corpora: Path, tmp_path: Path) -> None:
    (tmp_path / "b.jsonl").write_text((corpora / "openai.jsonl").read_text())
    (tmp_path / "a.jsonl").write_text((corpora / "sharegpt.jsonl").read_text())
    (tmp_path / "notes.txt").write_text("not a log")
    adapter = get_adapter("messages")
    assert [p.name for p in adapter.files(tmp_path)] == ["a.jsonl", "b.jsonl"]
    ids = [item.conversation_id for item in adapter.read(tmp_path) if isinstance(item, Conversation)]
    assert ids == ["a-1", "7", "support-1", "b-2"]
    with pytest.raises(DataError, match="folder holds no .json files"):
        get_adapter("casino").files(tmp_path)


def test_malformed_json_document_names_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "c1": {"messages": [\n')
    with pytest.raises(DataError, match=rf"{broken}:\d+: malformed JSON"):
        list(get_adapter("chitchat").read(broken))
    with pytest.raises(DataError, match="expected a JSON list at the top level, got dict"):
        list(get_adapter("casino").read(_write(tmp_path / "dict.json", {"a": 1})))


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj))
    return path


# --- chitchat -------------------------------------------------------------------------------------


def test_chitchat_two_views_merged_bursts_and_goal(corpora: Path) -> None:
    convs, rejects = split_items(get_adapter("chitchat").read(corpora / "chitchat_small.json"))
    assert set(convs) == {"chitchat-conv-1-a", "chitchat-conv-1-b", "chitchat-conv-2-a", "chitchat-conv-2-b"}

    a, b = convs["chitchat-conv-1-a"], convs["chitchat-conv-1-b"]
    assert [t.role for t in a.turns] == ["user", "assistant", "user"]
    assert [t.role for t in b.turns] == ["assistant", "user", "assistant"]
    assert a.turns[0].content == "Hello\nHow are you doing today?"
    assert a.turns[1].content == "im doing good\nhow are you?"  # the blank message is skipped
    assert a.turns[1].meta["timestamps"] == ["2018-05-02T19:38:33Z", "2018-05-02T19:38:35Z"]
    assert a.goal is not None and a.goal.text == "What superpower do you wish you had, and why?"
    assert a.source == a.domain == "chitchat"
    assert a.persona["pair_id"] == b.persona["pair_id"] == "chitchat-conv-1"
    assert (a.persona["speaker_id"], b.persona["speaker_id"]) == ("alice", "bob")
    assert a.outcome == {
        "ratings": {"witty": 5, "upbeat": 4, "interesting": 5},
        "started_at": "2018-05-02T19:38:00Z",
        "blank_messages_skipped": 1,
    }
    assert [t.content for t in a.turns] == [t.content for t in b.turns]

    # two groups of carol in a row, then a blank group between dave's: both merge into one turn
    c = convs["chitchat-conv-2-a"]
    assert [t.content for t in c.turns] == [
        "anyone here?\nhello??",
        "yes, sorry, was making tea\nwhat kind of tea?",
    ]
    assert c.goal is None


def test_chitchat_rejects_are_named_not_dropped(corpora: Path) -> None:
    _, rejects = split_items(get_adapter("chitchat").read(corpora / "chitchat_small.json"))
    excluded = [r for r in rejects if isinstance(r, Excluded)]
    bad = [r for r in rejects if not isinstance(r, Excluded)]
    assert len(excluded) == 1 and excluded[0].field == "conv-3.messages"
    assert excluded[0].line == 3 and "monologue" in excluded[0].reason
    assert len(bad) == 1
    assert (bad[0].line, bad[0].field) == (4, "conv-4.messages[1][0].text")
    assert "expected a string, got int" in str(bad[0])
    assert json.loads(bad[0].raw)["prompt"].startswith("If money")


def test_chitchat_embedded_corpus_maps() -> None:
    adapter = get_adapter("chitchat")
    assert adapter.files("embedded")[0].name == "dataset.json"
    items = []
    for item in adapter.read("embedded"):
        items.append(item)
        if len(items) == 60:
            break
    convs, rejects = split_items(items)
    assert convs and all(r.line >= 1 for r in rejects)
    for conv in convs.values():
        assert conv.conversation_id.endswith(("-a", "-b")) and conv.user_turns
        roles = [t.role for t in conv.turns]
        assert all(x != y for x, y in zip(roles, roles[1:], strict=False))  # bursts merged: roles alternate


# --- casino ---------------------------------------------------------------------------------------


def test_casino_goal_card_holds_private_priorities(corpora: Path) -> None:
    convs, rejects = split_items(get_adapter("casino").read(corpora / "casino_small.json"))
    assert not rejects
    assert set(convs) == {"casino-1001-a", "casino-1001-b", "casino-1002-a", "casino-1002-b"}
    a = convs["casino-1001-a"]
    assert (a.source, a.domain) == ("casino", "campsite")
    slots = a.goal.slots
    assert (slots["priority_high"], slots["priority_medium"], slots["priority_low"]) == (
        "Water",
        "Food",
        "Firewood",
    )
    assert slots["reason_high"] == "It is very hot where I camp."
    assert slots["item_values"] == {"Water": 5, "Food": 4, "Firewood": 3}
    assert set(a.goal.private) >= {
        "priority_high",
        "reason_high",
        "priority_low",
        "reason_low",
        "item_values",
    }
    assert "Water matters most to you" in a.goal.text and "It is very hot where I camp." in a.goal.text
    assert convs["casino-1001-b"].goal.slots["priority_high"] == "Firewood"
    assert a.persona["personality"]["svo"] == "prosocial" and a.persona["demographics"]["age"] == 31
    assert convs["casino-1001-b"].persona["participant"] == "mturk_agent_2"


def test_casino_deals_are_actions_from_the_users_side(corpora: Path) -> None:
    convs, _ = split_items(get_adapter("casino").read(corpora / "casino_small.json"))
    a, b = convs["casino-1001-a"], convs["casino-1001-b"]
    actions_a = [(t.role, t.meta["action"]) for t in a.turns if "action" in t.meta]
    assert [(role, act["type"]) for role, act in actions_a] == [
        ("assistant", "submit_deal"),
        ("user", "reject_deal"),
        ("user", "submit_deal"),
        ("assistant", "accept_deal"),
    ]
    # agent_2 proposed "I get 3 Firewood, 2 Water, 1 Food"; from agent_1 (the user of view a) it is flipped
    assert actions_a[0][1]["issue2youget"] == {"Food": 2, "Water": 1, "Firewood": 0}
    assert actions_a[0][1]["by"] == "assistant"
    # while the content renders the deal as its speaker said it
    assert (
        a.turns[4].content
        == "Submit-Deal: I get 1 Food, 2 Water, 3 Firewood; you get 2 Food, 1 Water, 0 Firewood."
    )
    accepted = actions_a[-1][1]
    assert accepted["issue2youget"] == {"Food": 1, "Water": 3, "Firewood": 0}
    assert a.outcome["deal"]["issue2youget"] == accepted["issue2youget"]
    assert b.outcome["deal"]["issue2youget"] == {"Food": 2, "Water": 0, "Firewood": 3}
    # the goal card's slots let a verifier recompute the recorded points
    for view in (a, b):
        values = view.goal.slots["item_values"]
        points = sum(values[item] * n for item, n in view.outcome["deal"]["issue2youget"].items())
        assert points == view.outcome["points_scored"]
    assert a.outcome["partner_points_scored"] == 21 and a.outcome["agreed"] and not a.outcome["walked_away"]
    assert a.outcome["satisfaction"] == "Extremely satisfied"

    walk = convs["casino-1002-b"]
    assert walk.turns[-1].meta["action"] == {"type": "walk_away", "by": "user"}
    assert walk.turns[-1].content.startswith("Walk-Away")
    assert walk.outcome["walked_away"] and not walk.outcome["agreed"] and "deal" not in walk.outcome


def test_casino_strategy_annotations_align_by_text(corpora: Path) -> None:
    convs, _ = split_items(get_adapter("casino").read(corpora / "casino_small.json"))
    strategies = [t.meta.get("strategies") for t in convs["casino-1001-a"].turns]
    # the annotations skip message 1; message 6 differs only in white space
    assert strategies == [
        ["small-talk"],
        None,
        ["self-need"],
        ["promote-coordination", "elicit-pref"],
        None,
        None,
        ["self-need", "vouch-fair"],
        None,
        None,
    ]


def test_casino_bad_dialogue_names_the_field(corpora: Path, tmp_path: Path) -> None:
    data = json.loads((corpora / "casino_small.json").read_text())
    data[0]["chat_logs"][4]["task_data"]["issue2youget"]["Water"] = "lots"
    data[1]["participant_info"]["mturk_agent_2"]["value2issue"]["Low"] = "Food"
    convs, rejects = split_items(get_adapter("casino").read(_write(tmp_path / "bad.json", data)))
    assert not convs
    assert [(r.line, r.field) for r in rejects] == [
        (1, "[0] (dialogue 1001).chat_logs[4].task_data.issue2youget.Water"),
        (2, "[1] (dialogue 1002).participant_info.mturk_agent_2.value2issue"),
    ]
    assert "not a count: 'lots'" in rejects[0].reason


def test_casino_real_valid_file(casino_dir: Path) -> None:
    convs, rejects = split_items(get_adapter("casino").read(casino_dir / "casino_valid.json"))
    assert not rejects
    assert len(convs) == 2 * 30
    for conv in convs.values():
        slots = conv.goal.slots
        assert {slots["priority_high"], slots["priority_medium"], slots["priority_low"]} == {
            "Food",
            "Water",
            "Firewood",
        }
        assert all(slots[f"reason_{level}"] for level in ("high", "medium", "low"))
        assert {"priority_high", "reason_high"} <= set(conv.goal.private)
        if conv.outcome["agreed"]:
            points = sum(slots["item_values"][k] * n for k, n in conv.outcome["deal"]["issue2youget"].items())
            assert points == conv.outcome["points_scored"]


# --- messages -------------------------------------------------------------------------------------


def test_openai_messages(corpora: Path) -> None:
    path = corpora / "openai.jsonl"
    convs, rejects = split_items(get_adapter("messages").read(path))
    assert set(convs) == {"support-1", "openai-2"}
    support = convs["support-1"]
    assert (support.domain, support.source) == ("customer_support", "openai")
    assert support.persona == {"system_prompt": "You are a helpful support agent."}
    assert [t.role for t in support.turns] == ["user", "assistant", "user"]

    tools = convs["openai-2"]
    assert tools.domain == "general"
    assert [t.content for t in tools.turns] == ["what's the weather in Oslo?", "It is 4 degrees in Oslo."]
    traffic = tools.turns[1].meta["tool_messages"]
    assert [m["role"] for m in traffic] == ["assistant", "tool"] and traffic[1]["content"] == '{"temp_c": 4}'

    assert [(r.path, r.line, r.field) for r in rejects] == [
        (str(path), 3, ""),
        (str(path), 4, "messages[1].role"),
        (str(path), 6, "messages[1].content"),
    ]
    assert rejects[0].reason.startswith("malformed JSON")
    assert "unknown role 'narrator'" in rejects[1].reason
    assert rejects[2].reason == "content is empty"


def test_sharegpt_conversations_and_options(corpora: Path) -> None:
    path = corpora / "sharegpt.jsonl"
    convs, rejects = split_items(get_adapter("messages").read(path, domain="books", source="mylogs"))
    assert set(convs) == {"sharegpt-1", "7"}
    first = convs["sharegpt-1"]
    assert (first.source, first.domain) == ("sharegpt_demo", "books")  # a line's own field wins
    assert first.persona == {"system_prompt": "Be brief."}
    assert [t.role for t in first.turns] == ["user", "assistant", "user"]
    assert convs["7"].source == "mylogs"
    assert [(r.line, r.field) for r in rejects] == [(3, "conversations[0].value"), (4, "sharegpt-4")]
    assert rejects[1].reason == "no user turn in this view"
