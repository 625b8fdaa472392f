"""Distributed training proven on this machine: `accelerate launch` with 2 CPU processes (gloo, the
committed infra/accelerate/cpu_multi.yaml) runs simulator SFT on the tiny model; after N steps the
loss and the trained adapter match a 1-process run with the same global batch; only process 0 saves;
the 2-process checkpoint resumes in one process. Agent GRPO (agent_rl, whose `rollout_func` plays
each process's share of the dialogues) runs on 2 processes too; its loss is not compared: the untrained
tiny policy earns the same reward in every GRPO group (zero advantages, loss 0 on any layout). sim_rl
under the same launch was run by hand (2 steps, saved once by process 0); it is not in the suite, to
keep this file near a minute.

Tolerance: the per-process batches are padded to their own longest row and the gradients are
averaged in another order, so the runs agree to float32 rounding, not bit for bit: logged losses
within 1e-3 (absolute, on losses near 6.2) and adapter weights within 1e-4 (they move ~3e-2).
Measured on this machine: losses equal to the 4 logged decimals, weights within 7e-7; the resumed
run within 6e-8 of the 2-process one.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from sim_support import CONVERSATIONS, REPO, tiny_base

from mimesis_rl.simulator.sft import SFTSettings
from mimesis_rl.training.launch import launch_worker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STEPS, GLOBAL_BATCH = 4, 4
LOSS_TOL, WEIGHT_TOL = 1e-3, 1e-4


def _section(root: Path, base: Path, tag: str, per_device: int, config: Path | None = None) -> dict[str, Any]:
    return {
        "train": str(CONVERSATIONS), "val": None, "base_model": str(base), "device": "cpu", "bf16": False,
        "max_length": 512, "window_turns": 6, "end_share": 0.3,  # exactly STEPS x GLOBAL_BATCH windows
        "leave": {"enabled": False}, "env": {"share": 0.0},
        "lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": "all-linear"},
        "trainer": {"max_steps": STEPS, "per_device_train_batch_size": per_device, "learning_rate": 1e-2,
                    "lr_scheduler_type": "constant", "warmup_ratio": 0.0, "logging_steps": 1, "save_steps": 2,
                    "disable_tqdm": True},
        "output_dir": str(root / tag / "out"), "checkpoint_dir": str(root / "ckpt"), "keep_checkpoints": True,
        "launcher": "accelerate" if config else "python",
        "accelerate_config": str(config) if config else None,
    }


def _config(root: Path) -> Path:
    """The committed 2-process config on a free port (other test runs may hold the default)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    text = (REPO / "infra" / "accelerate" / "cpu_multi.yaml").read_text()
    assert "num_processes: 2" in text
    path = root / "cpu_multi.yaml"
    path.write_text(text.replace("main_process_port: 29511", f"main_process_port: {port}"))
    return path


def _adapter(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "adapter_model.safetensors"))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_base(tmp_path_factory.mktemp("dist") / "base")


def _launch(settings: SFTSettings) -> dict[str, Any]:
    return launch_worker("mimesis_rl.simulator.sft", {"settings": settings.to_json(), "seed": 0},
                         settings.accelerate_config)


def test_two_cpu_processes_match_one_and_resume_in_one(tmp_path: Path, base: Path,
                                                       capfd: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Both runs through `accelerate launch` (1 process: infra/accelerate/cpu.yaml), each in a fresh
    process: a bf16 training earlier in the same Python process was seen to shift a later fp32 run."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    single = REPO / "infra" / "accelerate" / "cpu.yaml"
    one_settings = SFTSettings.from_section(_section(tmp_path / "a", base, "one", GLOBAL_BATCH, single))
    two_settings = SFTSettings.from_section(_section(tmp_path, base, "two", GLOBAL_BATCH // 2,
                                                     _config(tmp_path)))
    capfd.readouterr()
    with ThreadPoolExecutor(2) as pool:  # side by side: start-up (imports) dominates both
        one, two = pool.map(_launch, [one_settings, two_settings])
    out = capfd.readouterr()
    logs = out.out + out.err

    assert one["steps"] == two["steps"] == STEPS
    # the windows the steps reach, drawn once for the whole world; fitting to max_length may split some
    assert one["train_examples"] == two["train_examples"] >= STEPS * GLOBAL_BATCH
    assert abs(one["first_logged_loss"] - two["first_logged_loss"]) < LOSS_TOL
    assert abs(one["last_logged_loss"] - two["last_logged_loss"]) < LOSS_TOL
    a = _adapter(tmp_path / "a" / "one" / "out" / "adapter")
    b = _adapter(tmp_path / "two" / "out" / "adapter")
    moved = max(float(v.abs().max()) for k, v in a.items() if "lora_B" in k)  # lora_B starts at zero
    assert moved > 10 * WEIGHT_TOL  # the comparison below means something
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < WEIGHT_TOL

    # Only process 0 saved: one "saves" line, naming 2 processes; per-process files only for RNG state.
    assert logs.count("process 0 of 2 saves") == 1, logs[-3000:]
    (ckpt_root,) = (tmp_path / "ckpt").iterdir()
    files = sorted(p.name for p in (ckpt_root / "checkpoint-2").iterdir())
    assert [f for f in files if f.startswith("rng_state")] == ["rng_state_0.pth", "rng_state_1.pth"]
    assert files.count("adapter_model.safetensors") == 1 and "optimizer.pt" in files

    # The stage rerun on one process: the 2-process checkpoint at step 2 resumes there (same global
    # batch, so the same checkpoint folder) and ends where the 2-process run ended.
    import shutil

    shutil.rmtree(ckpt_root / "checkpoint-4")
    resumed = _launch(SFTSettings.from_section(_section(tmp_path, base, "two", GLOBAL_BATCH, single)))
    assert resumed["resumed_from_step"] == 2 and resumed["steps"] == STEPS
    c = _adapter(tmp_path / "two" / "out" / "adapter")
    assert max(float((b[k] - c[k]).abs().max()) for k in b) < WEIGHT_TOL


def test_agent_rl_runs_on_two_cpu_processes(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """agent_rl's `launcher: accelerate`: each process plays its slice of the GRPO group's dialogues
    through `rollout_func` (env mask, recorded log-probs) and process 0 alone saves the agent."""
    from peft import LoraConfig, get_peft_model

    from mimesis_rl.agent.artifact import save_agent
    from mimesis_rl.agent.rl_settings import AgentRLSettings
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.loading import load_base
    from mimesis_rl.models.lora import switch_adapter
    from mimesis_rl.models.testing import make_tiny_base

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tiny = make_tiny_base(tmp_path / "tiny")
    model, tok = load_base(tiny, device="cpu")
    torch.manual_seed(1)
    lora = LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
                      task_type="CAUSAL_LM")
    policy = get_peft_model(model, lora, adapter_name="default")
    policy.add_adapter("ref", lora)
    switch_adapter(policy, "default", trainable=True)
    sft = save_agent(policy, tok, tmp_path / "sft", tiny, SamplingParams(max_new_tokens=6), "agent_sft")
    settings = AgentRLSettings.from_section(dict(
        variant="assistant", user="scripted:cooperative", sft_dir=str(sft), base_model=str(tiny),
        domains=["bargain"], prompts_per_domain=2, max_turns=2, agent_max_new_tokens=6, max_steps=1,
        batch_size=2, num_generations=2, eval_seeds=0, device="cpu", bf16=False, save_steps=1,
        keep_checkpoints=True, output_dir=str(tmp_path / "rl"), report_dir=str(tmp_path / "rep"),
        checkpoint_dir=str(tmp_path / "ck"), launcher="accelerate", accelerate_config=str(_config(tmp_path))))
    capfd.readouterr()
    metrics = launch_worker("mimesis_rl.agent.rl", {"settings": settings.to_json(), "seed": 0},
                            settings.accelerate_config)
    out = capfd.readouterr()
    assert metrics["steps"] == 1 and metrics["first_reward"] is not None
    assert (out.out + out.err).count("process 0 of 2 saves") == 1
    assert (tmp_path / "rl" / "adapter" / "adapter_model.safetensors").exists()
    (ckpt_root,) = (tmp_path / "ck").iterdir()
    files = sorted(p.name for p in (ckpt_root / "checkpoint-1").iterdir())
    assert [f for f in files if f.startswith("rng_state")] == ["rng_state_0.pth", "rng_state_1.pth"]
