"""agent_rl's vLLM path on CPU: the policy's turns through `VLLMRunner` give the same dialogues, token
record, env mask and log-probs as our engine, and `agent_runner` picks the path the trainer runs in.

vLLM itself needs a GPU, so the generator handed to `VLLMRunner` here is a stand-in that keeps TRL's
`VLLMGeneration.generate` contract (token-id prompts in; prompt ids, completion ids, per-token
[log-prob] lists out; the budget read from `max_completion_length`) and decodes greedily on the tiny
model. What is under test is ours: the runner, the agent's token tracks and the TRL record built on it.
The real vLLM call is checked on a GPU when one is at hand (README "Scaling out").
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from rollout_support import LeavingUser, WordEnv, load_tiny, one_thread, tiny_dir, two_adapters  # noqa: F401

from mimesis_rl.agent.rl_rollout import agent_runner
from mimesis_rl.models.inference.scheduler import generate_batch
from mimesis_rl.models.lora import active_adapter
from mimesis_rl.rollout import ModelAgent, ModelRunner, SamplingParams, run_rollouts
from mimesis_rl.rollout.vllm_runner import VLLMRunner

pytestmark = pytest.mark.integration

SEEDS = [0, 1, 2, 3, 4, 6, 7, 9]
GREEDY = SamplingParams(max_new_tokens=8)


class GreedyVLLMStandIn:
    """TRL's `VLLMGeneration.generate` contract over the tiny model's `agent` adapter, greedy."""

    def __init__(self, model, tokenizer, stop_ids, pad_id) -> None:
        self.model, self.stop_ids, self.pad_id = model, stop_ids, pad_id
        self.max_completion_length = 64  # the trainer's whole-completion budget; a turn's is set per call
        self.budgets: list[int] = []

    def generate(self, prompts, images, num_generations, profiler=None):
        assert images is None and num_generations == 1
        self.budgets.append(self.max_completion_length)
        params = SamplingParams(max_new_tokens=self.max_completion_length)
        with active_adapter(self.model, "agent"), torch.no_grad():
            gens = generate_batch(self.model, prompts, params, stop_ids=self.stop_ids, pad_id=self.pad_id)
        return (prompts, [g.token_ids for g in gens], [[[lp] for lp in g.logprobs] for g in gens], None)


@pytest.fixture(scope="module")
def shared(tiny_dir):  # noqa: F811
    model, tok = load_tiny(tiny_dir)
    return two_adapters(model), tok


def test_vllm_runner_gives_the_engines_dialogues_record_and_logprobs(shared):
    model, tok = shared
    engine = ModelRunner(model, tok, GREEDY, adapter="agent")
    stand_in = GreedyVLLMStandIn(model, tok, engine.chat.stop_ids, engine.chat.pad_id)
    vllm = VLLMRunner(stand_in, tok, GREEDY, max_context=engine.max_context)

    ours = run_rollouts(WordEnv(), ModelAgent(engine), LeavingUser(), SEEDS, progress=False)
    theirs = run_rollouts(WordEnv(), ModelAgent(vllm), LeavingUser(), SEEDS, progress=False)

    assert [[(t.role, t.content) for t in s.trace] for s in theirs.states] == \
        [[(t.role, t.content) for t in s.trace] for s in ours.states]
    a, b = ours.to_trl(), theirs.to_trl()
    for key in ("prompt_ids", "completion_ids", "env_mask", "reward"):
        assert a[key] == b[key], key
    for x, y in zip(a["logprobs"], b["logprobs"], strict=True):
        assert torch.allclose(torch.tensor(x), torch.tensor(y), atol=1e-4)
    # every vLLM call ran on the turn's budget, and the trainer's own budget was put back
    assert set(stand_in.budgets) == {GREEDY.max_new_tokens} and stand_in.max_completion_length == 64
    assert sum(vllm.batch_sizes) == sum(engine.batch_sizes) > 0


def test_a_turn_ends_at_its_first_stop_token_and_a_cut_turn_is_marked(shared):
    model, tok = shared
    runner = VLLMRunner(SimpleNamespace(max_completion_length=64), tok, GREEDY, max_context=10_000)
    stop = runner.chat.end_of_turn_id
    logprobs = [[[-0.1], [-0.2], [-0.3], [-0.4]], [[-0.1], [-0.2], [-0.3]]]
    runner.generation.generate = lambda prompts, images, num_generations: (
        prompts, [[5, 6, stop, 7], [5, 6, 7]], logprobs, None)
    done, cut = runner.generate([[1, 2], [1, 3]], ["a", "b"])
    assert done.token_ids == [5, 6, stop] and done.logprobs == [-0.1, -0.2, -0.3] and done.stopped
    assert cut.token_ids == [5, 6, 7] and not cut.stopped
    with pytest.raises(ValueError, match="trainer's settings"):
        hotter = SamplingParams(max_new_tokens=8, temperature=0.5, do_sample=True)
        runner.generate([[1]], ["c"], sampling=hotter)


def test_agent_runner_follows_the_trainers_mode(tiny_dir):  # noqa: F811
    from peft import LoraConfig, get_peft_model

    base, tok = load_tiny(tiny_dir)
    model = get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj"]))  # the policy: `default`
    on_cpu = SimpleNamespace(use_vllm=False, state=SimpleNamespace(global_step=3))
    assert isinstance(agent_runner(on_cpu, model, tok, GREEDY, seed=0), ModelRunner)
    on_gpu = SimpleNamespace(use_vllm=True, vllm_generation=SimpleNamespace(max_completion_length=64))
    runner = agent_runner(on_gpu, model, tok, GREEDY, seed=0)
    assert isinstance(runner, VLLMRunner) and runner.generation is on_gpu.vllm_generation
