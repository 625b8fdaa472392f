"""A tiny trained simulator for the simulator tests: a tiny base whose tokenizer knows the fixture
conversations, and one short SFT run over them (real training, a couple of steps)."""

from __future__ import annotations

from pathlib import Path

from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.simulator.sft import SFTSettings, train_sft
from mimesis_rl.simulator.sft_data import sft_examples

REPO = Path(__file__).resolve().parents[2]
CONVERSATIONS = REPO / "tests" / "fixtures" / "sim" / "conversations.jsonl"


def tiny_base(folder: Path) -> Path:
    from mimesis_rl.models.testing import make_tiny_base

    texts = [m["content"] for ex in sft_examples(read_conversations(CONVERSATIONS)) for m in ex["messages"]]
    return make_tiny_base(folder, texts=texts * 3)


def tiny_simulator(base: Path, folder: Path, steps: int = 2, method: str = "lora") -> Path:
    """Train a LoRA (or `full`) simulator for `steps` steps; returns its folder (greedy, short turns)."""
    settings = SFTSettings.from_section({
        "method": method,
        "train": str(CONVERSATIONS), "val": None, "base_model": str(base), "device": "cpu", "max_length": 256,
        "batch_size": 4, "max_steps": steps, "learning_rate": 1e-2, "logging_steps": 1, "save_steps": 1000,
        "output_dir": str(folder), "checkpoint_dir": str(folder.parent / "ckpt"),
        "generation": {"max_new_tokens": 24, "do_sample": False, "max_retries": 0},
    })
    train_sft(settings, seed=0)
    return folder
