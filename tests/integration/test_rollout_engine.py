"""The lockstep engine against the naive one-dialogue-at-a-time loop, and its training record."""

from __future__ import annotations

import json

import pytest
import torch
from rollout_support import (  # noqa: F401
    LeavingUser,
    WordEnv,
    load_tiny,
    one_thread,
    recompute_logprobs,
    tiny_dir,
    two_adapters,
)

from mimesis_rl.models.lora import active_adapter
from mimesis_rl.rollout import ModelAgent, ModelRunner, SamplingParams, run_rollouts
from mimesis_rl.rollout.naive import NaiveAgent, play_naive
from mimesis_rl.simulator.runtime import UserSimulator

pytestmark = pytest.mark.integration

SEEDS = [0, 1, 2, 3, 4, 5, 6, 7, 9, 10]  # 0, 5, 10 leave at once; 1, 5, 9 send an empty message
GREEDY = SamplingParams(max_new_tokens=8)


@pytest.fixture(scope="module")
def shared(tiny_dir):  # noqa: F811
    """One tiny base with `agent` and `simulator` LoRA adapters."""
    model, tok = load_tiny(tiny_dir)
    return two_adapters(model), tok


def _dialogue(state) -> list[tuple]:
    return [(t.role, t.content, t.reasoning) for t in state.trace]


def test_engine_equals_naive_loop_with_scripted_users(shared):
    model, tok = shared
    env = WordEnv()
    result = run_rollouts(
        env,
        ModelAgent(ModelRunner(model, tok, GREEDY, adapter="agent")),
        LeavingUser(),
        SEEDS,
        progress=False,
    )
    naive = play_naive(
        env, NaiveAgent(ModelRunner(model, tok, GREEDY, adapter="agent")), LeavingUser(), SEEDS
    )
    assert [s.episode_id for s in result.states] == [s.episode_id for s in naive]
    assert [_dialogue(s) for s in result.states] == [_dialogue(s) for s in naive]
    assert [s.end_reason for s in result.states] == [s.end_reason for s in naive]
    # Dialogues ended early and dropped out: they differ in length, and some never reached the agent.
    turns = [s.agent_turns for s in result.states]
    assert len(set(turns)) > 2 and 0 in turns
    # An empty user message is flagged in the transcript (seed 1 sends one as its first reply).
    assert "user turn 2: empty message" in result.warnings[SEEDS.index(1)]


def test_mixed_users_and_two_adapters_on_one_base(shared):
    """Simulator and scripted users in one batch; agent and simulator adapters switch on one base."""
    model, tok = shared
    env = WordEnv()
    agent_runner = ModelRunner(model, tok, GREEDY, adapter="agent")
    sim_runner = ModelRunner(model, tok, SamplingParams(max_new_tokens=10), adapter="simulator")
    sim, scripted = UserSimulator(sim_runner, name="sim", card_style="prompted"), LeavingUser()
    sides = [sim if i % 2 else scripted for i in range(len(SEEDS))]
    result = run_rollouts(env, ModelAgent(agent_runner), sides, SEEDS, progress=False)
    naive = play_naive(
        env,
        NaiveAgent(ModelRunner(model, tok, GREEDY, adapter="agent")),
        [
            UserSimulator(ModelRunner(model, tok, SamplingParams(max_new_tokens=10), adapter="simulator",
                                      reuse_cache=False), card_style="prompted")
            if i % 2
            else LeavingUser()
            for i in range(len(SEEDS))
        ],
        SEEDS,
    )
    assert [_dialogue(s) for s in result.states] == [_dialogue(s) for s in naive]
    assert result.users == ["sim" if i % 2 else "leaving-user" for i in range(len(SEEDS))]
    assert model.active_adapter == "agent"  # switching put the previous adapter back
    # Each round made one call per side: batches shrink as dialogues drop out, never exceed the open ones.
    assert agent_runner.batch_sizes[0] == sum(1 for s in result.states if s.agent_turns > 0)
    assert agent_runner.batch_sizes == sorted(agent_runner.batch_sizes, reverse=True)
    assert sim_runner.batch_sizes[0] == sides.count(sim)
    # The agent's tokens were scored by the agent adapter even though the simulator spoke in between,
    # and the two adapters really differ.
    out = result.to_trl()
    checked = 0
    for prompt, completion, logprobs, mask in zip(
        out["prompt_ids"], out["completion_ids"], out["logprobs"], out["env_mask"], strict=True
    ):
        if sum(mask) == 0:
            continue
        agent_tokens = torch.tensor(mask, dtype=torch.bool)
        with active_adapter(model, "agent"):
            expected = recompute_logprobs(model, prompt, completion)
        with active_adapter(model, "simulator"):
            other = recompute_logprobs(model, prompt, completion)
        assert torch.allclose(torch.tensor(logprobs)[agent_tokens], expected[agent_tokens], atol=1e-4)
        assert not torch.allclose(other[agent_tokens], expected[agent_tokens], atol=1e-2)
        checked += 1
    assert checked >= 5


def test_trl_record_logprobs_and_env_mask(shared):
    model, tok = shared
    env = WordEnv()
    runner = ModelRunner(
        model, tok, SamplingParams(max_new_tokens=8, do_sample=True, temperature=1.0), adapter="agent"
    )
    result = run_rollouts(env, ModelAgent(runner), LeavingUser(), SEEDS, progress=False)
    out = result.to_trl()
    n = len(SEEDS)
    assert all(len(out[k]) == n for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "reward"))
    for state, prompt, completion, logprobs, mask in zip(
        result.states, out["prompt_ids"], out["completion_ids"], out["logprobs"], out["env_mask"], strict=True
    ):
        assert len(completion) == len(logprobs) == len(mask) > 0
        agent_msgs = [t.content for t in state.trace if t.role == "assistant"]
        if not agent_msgs:  # the user left before the agent spoke: one masked end token
            assert mask == [0] and completion == [runner.chat.end_of_turn_id]
            continue
        # env_mask marks exactly the agent's generated tokens: its runs decode to the agent's messages.
        runs, current = [], []
        for tok_id, m in zip(completion, mask, strict=True):
            if m:
                current.append(tok_id)
            elif current:
                runs.append(current)
                current = []
        runs.append(current) if current else None
        assert [runner.chat.decode(r) for r in runs] == agent_msgs
        assert mask[-1] == 1  # the completion ends on the agent's last token
        # Log-probs of agent tokens equal one plain forward over prompt + completion (agent adapter on).
        with active_adapter(model, "agent"):
            expected = recompute_logprobs(model, prompt, completion)
        agent = torch.tensor(mask, dtype=torch.bool)
        assert torch.allclose(torch.tensor(logprobs)[agent], expected[agent], atol=1e-4)
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if not m)


def test_sampled_rollouts_do_not_depend_on_batch_composition(shared):
    model, tok = shared
    env = WordEnv()
    params = SamplingParams(max_new_tokens=8, do_sample=True, temperature=1.2, top_p=0.9)
    batch = run_rollouts(
        env,
        ModelAgent(ModelRunner(model, tok, params, adapter="agent", seed=3)),
        LeavingUser(),
        SEEDS,
        progress=False,
    )
    alone = [
        run_rollouts(
            env,
            ModelAgent(ModelRunner(model, tok, params, adapter="agent", seed=3)),
            LeavingUser(),
            [seed],
            progress=False,
        ).states[0]
        for seed in SEEDS[1:3]
    ]
    assert [_dialogue(s) for s in batch.states[1:3]] == [_dialogue(s) for s in alone]
    other = run_rollouts(
        env,
        ModelAgent(ModelRunner(model, tok, params, adapter="agent", seed=4)),
        LeavingUser(),
        SEEDS,
        progress=False,
    )
    assert [_dialogue(s) for s in other.states] != [_dialogue(s) for s in batch.states]


def test_repeated_seeds_get_their_own_ids_and_samples(shared):
    model, tok = shared
    params = SamplingParams(max_new_tokens=8, do_sample=True, temperature=1.5)
    result = run_rollouts(
        WordEnv(),
        ModelAgent(ModelRunner(model, tok, params, adapter="agent")),
        LeavingUser(),
        [3, 3, 3],
        progress=False,
    )
    assert [s.episode_id for s in result.states] == ["word-3#0", "word-3#1", "word-3#2"]
    firsts = [next(t.content for t in s.trace if t.role == "assistant") for s in result.states]
    assert len(set(firsts)) == 3


def test_silent_model_and_empty_messages_are_reported_not_fatal(shared, tmp_path):
    """A model that only ever emits its end token: empty agent messages, no action, a clear trace."""
    model, tok = shared
    with torch.no_grad():
        norm = model.get_base_model().model.norm.weight
        saved = norm.clone()
        norm.zero_()  # all logits 0: greedy picks id 0, <|endoftext|>, a stop token
    try:
        result = run_rollouts(
            WordEnv(),
            ModelAgent(ModelRunner(model, tok, GREEDY, adapter="agent")),
            LeavingUser(),
            SEEDS,
            progress=False,
        )
    finally:
        with torch.no_grad():
            norm.copy_(saved)
    path = tmp_path / "transcripts.jsonl"
    assert result.write(path) == len(SEEDS)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    spoke = [r for r in records if r["agent_turns"] > 0]
    assert spoke and all(r["reward"] == 0.0 for r in records)
    for record in spoke:
        assert any(w == "agent turn 1: empty message" for w in record["warnings"])
        assert any("never emitted an action" in w or "empty" in w for w in record["warnings"])
        assert any(t["role"] == "environment" and "empty message" in t["content"] for t in record["turns"])
    assert any(t["reasoning"] for r in records for t in r["turns"] if t["role"] == "user")
    assert result.summary()["n"] == len(SEEDS)


def test_user_reasoning_never_reaches_the_agent(shared):
    model, tok = shared
    agent = ModelAgent(ModelRunner(model, tok, GREEDY, adapter="agent"))
    seen: list[str] = []
    original = agent.act

    def spy(observations):
        seen.extend(m["content"] for o in observations for m in o.messages)
        return original(observations)

    agent.act = spy  # type: ignore[method-assign]
    result = run_rollouts(WordEnv(), agent, LeavingUser(), SEEDS, progress=False)
    private = {t.reasoning for s in result.states for t in s.trace if t.reasoning}
    assert private and not any(p in text for p in private for text in seen)
    prompts = [tok.decode(p) for p in result.to_trl()["prompt_ids"]]
    completions = [tok.decode(c) for c in result.to_trl()["completion_ids"]]
    assert not any(p in text for p in private for text in prompts + completions)


def test_kv_reuse_changes_nothing_but_the_prefill(shared):
    """Carrying each dialogue's KV cache between rounds gives the same tokens and log-probs as full
    prefill, and feeds far fewer tokens through the model."""
    model, tok = shared
    params = SamplingParams(max_new_tokens=8, do_sample=True, temperature=1.0)
    runs = {}
    for reuse in (True, False):
        runner = ModelRunner(model, tok, params, adapter="agent", reuse_cache=reuse)
        sim = ModelRunner(model, tok, params, adapter="simulator", reuse_cache=reuse)
        result = run_rollouts(
            WordEnv(max_turns=4),
            ModelAgent(runner),
            UserSimulator(sim, card_style="prompted"),
            [2, 3, 4, 6, 7],
            progress=False,
        )
        runs[reuse] = (result, runner, sim)
    (cached, c_agent, c_user), (full, f_agent, f_user) = runs[True], runs[False]
    assert c_agent.reuse_cache and not f_agent.reuse_cache
    assert [_dialogue(s) for s in cached.states] == [_dialogue(s) for s in full.states]
    a, b = cached.to_trl(), full.to_trl()
    assert a["completion_ids"] == b["completion_ids"] and a["env_mask"] == b["env_mask"]
    for x, y in zip(a["logprobs"], b["logprobs"], strict=True):
        assert torch.allclose(torch.tensor(x), torch.tensor(y), atol=1e-4)
    assert len(c_agent.batch_sizes) > 1  # several rounds, so there was something to reuse
    assert sum(c_agent.prefill_tokens) < 0.6 * sum(f_agent.prefill_tokens)
    assert sum(c_user.prefill_tokens) < sum(f_user.prefill_tokens)
    assert all(t.kv is None for t in cached.tracks)  # caches are released with the result
