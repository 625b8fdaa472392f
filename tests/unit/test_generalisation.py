"""The generalisation matrix without models: pairing, behaviour read from traces, paired statistics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mimesis_rl.envs.loop import play
from mimesis_rl.envs.multi import PerDomainAgent
from mimesis_rl.envs.protocols import Observation
from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent
from mimesis_rl.envs.specs import make_user
from mimesis_rl.eval.generalisation_metrics import (
    analyse,
    clarifying_questions,
    disclosed,
    private_known_at,
)
from mimesis_rl.eval.generalisation_run import agent_problem, agent_twin, play_agent, trained_against
from mimesis_rl.eval.generalisation_settings import GeneralisationSettings, cell_seeds
from mimesis_rl.stats import interval_verdict, paired_difference, stratified_rate_difference

MEMBERS = ("scripted:terse", "scripted:private", "scripted:fickle", "scripted:chaotic")


class Deviating:
    """The domain's scripted agent for the first `k` turns, then a different message: the two agents'
    dialogues share a prefix, after which only the agent differs."""

    def __init__(self, domain: str, k: int) -> None:
        self.inner = scripted_agent(domain)
        self.k = k
        self.name = f"deviating-{k}"

    def act(self, observations: list[Observation]) -> list[str]:
        return [m if o.turn <= self.k else "Could you say that once more, please?"
                for o, m in zip(observations, self.inner.act(observations), strict=True)]


def _goal(state) -> dict:  # noqa: ANN001
    return state.hidden.get("original_goal") or state.goal.model_dump()


def _user_turns(state) -> list[tuple[str, str]]:
    return [(t.content, t.reasoning or "") for t in state.trace if t.role == "user"]


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_same_seeds_same_scripted_user_behaviour_for_every_agent(domain: str) -> None:
    """Paired evaluation: for every agent the same seeds give the same goal cards and the same
    scripted-user behaviour — identical user turns as long as the agents said the same things."""
    env = make_env(domain)
    seeds = cell_seeds(GeneralisationSettings(dialogues_per_cell=6))
    for spec in MEMBERS:
        base = play(env, scripted_agent(domain), make_user(spec, domain), seeds)
        again = play(env, scripted_agent(domain), make_user(spec, domain), seeds)
        other = play(env, Deviating(domain, 1), make_user(spec, domain), seeds)
        for a, b, c in zip(base, again, other, strict=True):
            assert _goal(a) == _goal(b) == _goal(c)  # the goal the user started with
            assert a.to_record() == b.to_record()  # a second run of the same agent: the same dialogue
            ua, uc = _user_turns(a), _user_turns(c)
            # opening + the reply to the first (identical) agent turn are the same for both agents
            shared = min(2, len(ua), len(uc))
            assert ua[:shared] == uc[:shared], (spec, a.episode_id)


def test_the_matrix_pairs_dialogues_across_agents() -> None:
    """Through `play_agent` (many members and envs in one rollout) the two agents meet the same
    (member, env, seed) dialogues, with the same user openings."""
    envs = {d: make_env(d, max_turns=3) for d in ("shopping", "returns", "bargain")}
    users = {m: {d: make_user(m, d) for d in envs} for m in MEMBERS[:3]}
    seeds = [5, 6]
    a = play_agent(PerDomainAgent({d: scripted_agent(d) for d in envs}, "a"), "a", users, envs, seeds,
                   progress=False)
    b = play_agent(PerDomainAgent({d: scripted_agent(d, "never_act") for d in envs}, "b"), "b", users, envs,
                   seeds, progress=False)
    assert len(a.rows) == len(b.rows) == 3 * 3 * 2
    keys = [(r["member"], r["env"], r["seed"]) for r in a.rows]
    assert keys == [(r["member"], r["env"], r["seed"]) for r in b.rows]
    assert len(set(keys)) == len(keys)
    for ra, rb in zip(a.records, b.records, strict=True):
        assert ra["goal"]["text"] == rb["goal"]["text"]  # the same card (slots may change mid-way)
        assert ra["turns"][0]["role"] == "user" and ra["turns"][0] == rb["turns"][0]
    assert all(r["agent_turns"] <= 3 for r in a.rows + b.rows)
    # played in small lockstep batches (env by env): the same dialogues, the same order
    chunked = play_agent(PerDomainAgent({d: scripted_agent(d) for d in envs}, "a"), "a", users, envs, seeds,
                         progress=False, batch_dialogues=5)
    assert chunked.rows == a.rows


def test_private_disclosure_and_actions_before_it() -> None:
    env = make_env("shopping")
    state = env.reset(3)
    budget = state.goal.slots["budget"]
    slots = state.goal.slots
    assert disclosed(f"I can spend up to ${budget}.", "shopping", "budget", budget, slots)
    assert disclosed(f"my max is {budget} bucks", "shopping", "budget", budget, slots)
    assert not disclosed(f"I have {budget}0 followers", "shopping", "budget", budget, slots)
    assert not disclosed("I'd rather not say my budget.", "shopping", "budget", budget, slots)
    ret = make_env("returns").reset(3)
    cond = ret.goal.slots["condition"]
    from mimesis_rl.envs.domains.returns import CONDITION_TEXT

    assert disclosed(CONDITION_TEXT[cond], "returns", "condition", cond, ret.goal.slots)

    # A played dialogue: the scripted agent asks for the budget, the private user declines at first.
    states = play(env, scripted_agent("shopping"), make_user("scripted:private", "shopping"), list(range(20)))
    for s in states:
        known = private_known_at(s)
        told = [i for i, t in enumerate([t for t in s.trace if t.role == "user"])
                if disclosed(t.content, "shopping", "budget", s.goal.slots["budget"], s.goal.slots)]
        assert (known is None) == (not told)
    assert any(private_known_at(s) is not None for s in states)
    # travel has no private slots: nothing to know
    assert private_known_at(make_env("travel").reset(1)) is None


def test_clarifying_questions_are_questions_without_an_action() -> None:
    env = make_env("shopping")
    states = play(env, scripted_agent("shopping", "never_act"), make_user("scripted:terse", "shopping"), [1])
    assert clarifying_questions(states[0]) == states[0].agent_turns  # every message asks, none acts
    states = play(env, scripted_agent("shopping", "invalid"), make_user("scripted:terse", "shopping"), [1])
    assert clarifying_questions(states[0]) == 0


def test_paired_difference_on_written_numbers() -> None:
    a = {("m1", "e", s): v for s, v in enumerate([1, 1, 1, 0])} | {("m2", "e", s): 1.0 for s in range(4)}
    b = {("m1", "e", s): v for s, v in enumerate([0, 1, 0, 0])} | {("m2", "e", s): 1.0 for s in range(4)}
    pooled = paired_difference(a, b, 500, 0.95)
    assert pooled["diff"] == pytest.approx(2 / 8) and pooled["pairs"] == 8
    strat = paired_difference(a, b, 500, 0.95, strata=lambda k: k[0])
    assert strat["diff"] == pytest.approx((0.5 + 0.0) / 2)
    lo, hi = strat["ci"]
    assert 0.0 <= lo <= strat["diff"] <= hi <= 0.5  # m2's pairs never differ: half the weight is exact
    same = paired_difference(a, a, 200, 0.95)
    assert same["diff"] == 0 and same["ci"] == [0.0, 0.0]
    assert paired_difference(a, {}, 10, 0.9) == {"diff": None, "ci": None, "pairs": 0}


@pytest.mark.parametrize(
    ("ci", "higher", "verdict"),
    [([0.1, 0.3], True, "holds"), ([-0.3, -0.1], True, "does not hold"), ([-0.1, 0.2], True, "within noise"),
     ([0.0, 0.2], True, "within noise"), ([-0.3, -0.1], False, "holds"), (None, True, "not measured"),
     ([math.nan, math.nan], True, "not measured")],
)
def test_interval_verdict(ci, higher, verdict) -> None:  # noqa: ANN001
    assert interval_verdict(ci, higher) == verdict


def test_analyse_counts_better_on_k_of_n() -> None:
    settings = GeneralisationSettings.from_section({
        "bootstrap": 300, "comparisons": {"x": {"a": "good", "b": "bad"}, "y": {"a": "good", "b": "ghost"}}})
    rows = []
    for agent, p in (("good", 1.0), ("bad", 0.0)):
        for m in ("m1", "m2", "m3"):
            for s in range(4):
                win = p if m != "m3" else 0.0  # on m3 both fail: no difference
                rows.append({"agent": agent, "member": m, "env": "e", "seed": s, "success": bool(win),
                             "reward": win, "agent_turns": 2, "turns_to_success": 2 if win else None,
                             "clarifying_questions": 1, "has_private": False, "private_known_at": None,
                             "actions_before_private_known": None})
    out = analyse(rows, settings, ["good", "bad"], ["m1", "m2", "m3"], ["e"])
    x = out["comparisons"]["x"]
    assert (x["better"], x["better_clear"], x["worse_clear"], x["of"]) == (2, 2, 0, 3)
    assert [r["verdict"] for r in x["per_member"]] == ["holds", "holds", "within noise"]
    assert x["overall"]["diff"] == pytest.approx(2 / 3) and x["overall"]["verdict"] == "holds"
    assert out["comparisons"]["y"] == {"a": "good", "b": "ghost", "title": "", "metric": "success",
                                       "measured": False, "missing": ["ghost"]}
    assert out["per_agent"]["good"]["success_rate"] == pytest.approx(2 / 3)
    assert len(out["cells"]) == 2 * 3


def test_settings_refuse_bad_sections() -> None:
    with pytest.raises(ValueError, match="params.yaml: agent_eval.nope: unknown key"):
        GeneralisationSettings.from_section({"nope": 1})
    with pytest.raises(ValueError, match="agents\\[0\\]: needs `name` and `spec`"):
        GeneralisationSettings.from_section({"agents": [{"name": "x"}]})
    with pytest.raises(ValueError, match="dialogues_per_cell"):
        GeneralisationSettings.from_section({"dialogues_per_cell": 0})
    with pytest.raises(ValueError, match="duplicate names"):
        GeneralisationSettings.from_section({"agents": [{"name": "a", "spec": "scripted"}] * 2})


def test_an_agent_folder_that_kept_its_warm_start_is_the_warm_starts_twin(tmp_path: Path) -> None:
    """agent_eval reuses dialogues only for folders that play alike: same files and manifest, whatever
    their provenance (`extra`) says; one changed weight byte is another agent."""
    from mimesis_rl.models.artifact import ModelManifest, write_manifest

    def folder(name: str, weights: bytes, stage: str) -> str:
        root = tmp_path / "models" / name
        (root / "adapter").mkdir(parents=True)
        (root / "adapter" / "adapter_model.safetensors").write_bytes(weights)
        (root / "adapter" / "README.md").write_text(f"trained by {stage}")
        write_manifest(root, ModelManifest(role="agent", kind="lora", base={"path": "models/base"},
                                           extra={"stage": stage}))
        return f"models/{name}"

    sft, kept, moved = folder("sft", b"w" * 64, "agent_sft"), folder("rl", b"w" * 64, "agent_rl"), folder(
        "rl2", b"w" * 63 + b"x", "agent_rl")
    key, twin = agent_twin(sft, {}, tmp_path)
    assert key is not None and twin is None
    assert agent_twin(kept, {key: "agent_sft"}, tmp_path) == (key, "agent_sft")
    assert agent_twin(f"model:{kept}", {key: "agent_sft"}, tmp_path)[1] == "agent_sft"
    assert agent_twin(moved, {key: "agent_sft"}, tmp_path)[1] is None
    assert agent_twin("scripted", {key: "agent_sft"}, tmp_path) == (None, None)
    assert agent_twin("models:/mimesis-agent/1", {}, tmp_path) == (None, None)
    # the same folder rule answers whether it can be played and what it trained against
    assert agent_problem(kept, tmp_path) is None and agent_problem(f"model:{kept}", tmp_path) is None
    # Re-saved configs spelled differently (PEFT's module order, a pad token written as an object, as
    # an RL stage that kept its warm start writes them) are the same agent; another rank is not.
    pad = {"content": "<|endoftext|>", "lstrip": False, "normalized": False, "rstrip": False}
    for name, modules, token, rank in (("sft", ["q_proj", "v_proj"], "<|endoftext|>", 16),
                                       ("rl", ["v_proj", "q_proj"], pad, 16), ("rl2", ["q_proj"], pad, 8)):
        (tmp_path / "models" / name / "adapter" / "adapter_config.json").write_text(
            json.dumps({"r": rank, "target_modules": modules}))
        (tmp_path / "models" / name / "special_tokens_map.json").write_text(json.dumps({"pad_token": token}))
    (tmp_path / "models" / "rl2" / "adapter" / "adapter_model.safetensors").write_bytes(b"w" * 64)
    key, _ = agent_twin(sft, {}, tmp_path)
    assert agent_twin(kept, {key: "agent_sft"}, tmp_path)[1] == "agent_sft"
    assert agent_twin(moved, {key: "agent_sft"}, tmp_path)[1] is None
    assert "does not exist" in (agent_problem("model:models/gone", tmp_path) or "")
    assert agent_problem("scripted:never_act", tmp_path) is None
    assert trained_against("scripted", tmp_path) == []
    assert trained_against(f"model:{kept}", tmp_path) == ["agent_rl"]


def test_a_stratified_rate_difference_weighs_each_stratum_and_skips_one_sided_ones() -> None:
    one = stratified_rate_difference({"a": (9, 10, 1, 10)})
    assert one["diff"] == pytest.approx(0.8) and one["ci"][0] > 0.4 and one["strata"] == ["a"]
    # weights n_a*n_b/(n_a+n_b): 5 for (10, 10), 1.6 for (8, 2)
    two = stratified_rate_difference({"a": (9, 10, 1, 10), "b": (4, 8, 1, 2), "c": (3, 3, 0, 0)})
    assert two["diff"] == pytest.approx((5 * 0.8 + 1.6 * 0.0) / 6.6) and two["left_out"] == ["c"]
    assert two["ci"][0] <= two["diff"] <= two["ci"][1]
    assert stratified_rate_difference({"c": (3, 3, 0, 0)})["diff"] is None
