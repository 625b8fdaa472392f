"""Fixtures for the rollout tests: a tiny real base model, a small task domain and a scripted user.

The domain and user are written here (not taken from `envs.domains`) so the engine's tests pin
down exact dialogue shapes: users who leave after a seed-dependent number of replies, one who
leaves at once, one who sends an empty message.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import ActionSpec, EpisodeState, SessionSpec, UserReply, Verdict
from mimesis_rl.envs.task_env import Scenario, TaskEnv, action_specs
from mimesis_rl.models.loading import load_base
from mimesis_rl.models.testing import TINY_TEST_CONFIG, make_tiny_base

WORDS = ("apple", "river", "stone", "cloud", "lamp", "tiger", "piano", "bread")


class WordEnv(TaskEnv):
    """Find the user's secret word and submit it: `<action>{"type": "submit", "word": "..."}</action>`."""

    name = "word"
    description = "guess the user's secret word"
    max_turns = 4
    actions = action_specs(
        ActionSpec(type="submit", kind="final", fields={"word": "str"}, doc="submit the secret word")
    )

    def sample(self, rng: random.Random) -> Scenario:
        word = rng.choice(WORDS)
        return Scenario(
            goal=GoalCard(text=f"You think of the word {word}.", slots={"word": word}, private=["word"])
        )

    def intro(self, scenario: Scenario) -> str:
        return "Ask the user questions and find their secret word."

    def score(self, state: EpisodeState) -> Verdict:
        guess = state.final_action.args.get("word") if state.final_action else None
        ok = guess == state.goal.slots["word"]
        return Verdict(reward=1.0 if ok else 0.0, success=ok)


class LeavingUser:
    """Scripted user: leaves after `seed % 3 + 1` replies; seed % 5 == 0 leaves at once; seed % 4 == 1
    sends one empty message. Private reasoning in every reply."""

    name = "leaving-user"

    def start(self, specs: list[SessionSpec]) -> list[dict[str, Any]]:
        return [{"spec": spec, "replies": 0} for spec in specs]

    def opening(self, sessions: list[dict[str, Any]]) -> list[UserReply]:
        out = []
        for s in sessions:
            seed = s["spec"].seed
            out.append(
                UserReply(
                    message="bye" if seed % 5 == 0 else f"hi, guess my word ({seed})",
                    reasoning=f"secret is {s['spec'].goal.slots['word']}",
                    ended=seed % 5 == 0,
                )
            )
        return out

    def respond(self, sessions: list[dict[str, Any]], agent_messages: list[str]) -> list[UserReply]:
        out = []
        for s, msg in zip(sessions, agent_messages, strict=True):
            s["replies"] += 1
            seed, n = s["spec"].seed, s["replies"]
            text = "" if (seed % 4 == 1 and n == 1) else f"reply {n} to {len(msg)} chars"
            out.append(UserReply(message=text, reasoning=f"private thought {n}", ended=n >= seed % 3 + 1))
        return out


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on a shared 2-core machine: one intra-op thread is ~5x faster than oversubscribing."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 1024 positions: room for a built-in domain's system prompt under the tiny tokenizer.
    config = dataclasses.replace(TINY_TEST_CONFIG, max_position_embeddings=1024)
    return make_tiny_base(tmp_path_factory.mktemp("rollout-tiny") / "base", config=config)


def load_tiny(path: Path) -> tuple[Any, Any]:
    torch.manual_seed(0)
    return load_base(path, dtype=torch.float32, device="cpu")


def two_adapters(model: Any) -> PeftModel:
    """Agent and simulator LoRA adapters over one base, both non-trivial (random B), frozen.

    The large scale makes the random model's greedy output depend on its context (a random tiny
    Llama alone repeats one token), so transcripts differ between dialogues and adapters.
    """
    config = LoraConfig(
        r=4,
        lora_alpha=256,
        target_modules=["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"],
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    torch.manual_seed(1)
    peft = get_peft_model(model, config, adapter_name="agent")
    peft.add_adapter("simulator", copy.deepcopy(config))
    for p in peft.parameters():
        p.requires_grad_(False)
    peft.set_adapter("agent", inference_mode=True)
    return peft.eval()


def recompute_logprobs(
    model: Any, prompt_ids: list[int], completion_ids: list[int], temperature: float = 1.0
) -> torch.Tensor:
    """Per-token log-probs of the completion under one plain fp32 forward of prompt + completion."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    return (
        torch.log_softmax(logits / temperature, -1)
        .gather(1, torch.tensor(completion_ids)[:, None])
        .squeeze(1)
    )


def same_adapter(checkpoint: Path, saved: Path) -> None:
    """A resumed run saved exactly the adapter of the checkpoint it resumed from."""
    from safetensors.torch import load_file

    a, b = load_file(checkpoint / "adapter_model.safetensors"), load_file(saved / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
