"""A fully fine-tuned simulator (`sim_sft.method: full`) through the stages after SFT, tiny model, real
TRL steps: GRPO trains it on as a whole model and saves one, and agent training plays it beside the
policy (it has no adapter to share the policy's base with)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from sim_support import CONVERSATIONS, tiny_base, tiny_simulator

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import SessionSpec
from mimesis_rl.models.artifact import read_manifest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def full_sft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sim_full")
    return tiny_simulator(tiny_base(root / "base"), root / "sft", steps=1, method="full")


def test_grpo_trains_a_fully_fine_tuned_simulator_as_a_whole_model(full_sft: Path, tmp_path: Path) -> None:
    """Every weight is in GRPO's optimizer, in fp32, and the folder saved is a whole model that loads as a
    simulator. (The tiny model's 16-token completions score 0 on every reward, so its advantages are 0 and
    the weights do not move; what is checked is what trains and what is saved.)"""
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    from mimesis_rl.simulator.rl import RLSettings, train_rl
    from mimesis_rl.simulator.runtime import UserSimulator

    class Optimised(TrainerCallback):
        seen: dict[str, int] = {}

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                        **kwargs: Any) -> None:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            self.seen.update(optimised=sum(p.numel() for p in params),
                             model=sum(p.numel() for p in model.parameters()),
                             fp32=all(p.dtype == torch.float32 for p in params))

    settings = RLSettings.from_section({
        "sft_dir": str(full_sft), "train": str(CONVERSATIONS), "device": "cpu", "generation": "engine",
        "corpus_prompts_per_domain": 4, "env_prompts_per_domain": 1, "decision_prompts_per_domain": 0,
        "env": {"domains": ["shopping"], "episodes_per_domain": 1}, "labeler": "rules",
        "rewards": {"realism": 0.0},  # no discriminator fit on the tiny model
        "output_dir": str(tmp_path / "rl"), "checkpoint_dir": str(tmp_path / "ckpt"),
        "trainer": {"max_steps": 1, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 2,
                    "num_generations": 2, "max_completion_length": 16, "save_steps": 1000},
    })
    train_rl(settings, seed=3, extra_callbacks=[Optimised()])
    assert Optimised.seen["optimised"] == Optimised.seen["model"] and Optimised.seen["fp32"]
    out = Path(settings.output_dir)
    manifest = read_manifest(out)
    assert manifest.kind == "full" and manifest.extra["stage"] == "sim_rl" and not (out / "adapter").exists()
    before = load_file(full_sft / "model" / "model.safetensors")
    after = load_file(out / "model" / "model.safetensors")
    assert set(before) == set(after) and all(v.dtype == torch.float32 for v in after.values())
    assert sum(v.numel() for v in after.values()) == Optimised.seen["model"]  # the whole model, saved
    assert UserSimulator.load(out, device="cpu").runner.adapter is None


def test_agent_training_plays_a_fully_fine_tuned_simulator_beside_the_policy(full_sft: Path) -> None:
    from mimesis_rl.models.loading import load_tokenizer
    from mimesis_rl.simulator.build import PolicyBackend, UserDecoding, build_user

    base = Path(read_manifest(full_sft).base["path"])
    backend = PolicyBackend(model=None, tokenizer=load_tokenizer(base), base=base)
    user = build_user(f"learned:{full_sft}", backend, UserDecoding(seed=1))
    assert user.runner.adapter is None and user.runner.model is not None
    [session] = user.start([SessionSpec(goal=GoalCard(text="You want a red scarf."), domain="shopping")])
    [reply] = user.opening([session])
    assert reply.message or reply.ended  # a turn of its own model (the tiny model may end at once)
