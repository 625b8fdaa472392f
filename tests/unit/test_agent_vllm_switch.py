"""agent_rl's switch for TRL's vLLM mode: off by default, passed to GRPOConfig as given when on, and a
clear refusal where vLLM or a GPU is missing (this machine), not an error deep inside TRL."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mimesis_rl.agent.rl_settings import AgentRLSettings
from mimesis_rl.agent.rl_trainer import vllm_options
from mimesis_rl.config import load_params

REPO = Path(__file__).resolve().parents[2]


def test_the_project_params_leave_it_off() -> None:
    from tasks.agent_rl import variant_section

    section, _, _ = variant_section(load_params(REPO / "params.yaml"), "mimesis")
    settings = AgentRLSettings.from_section(section)
    assert settings.vllm == {"use_vllm": False} and vllm_options(settings.vllm) == {}


def test_only_trl_vllm_names_are_taken() -> None:
    with pytest.raises(ValueError, match="not TRL vLLM options"):
        AgentRLSettings.from_section(dict(vllm={"use_vllm": True, "gpu_memory": 0.5}))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_on_a_cpu_machine_the_switch_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="CUDA device"):
        vllm_options({"use_vllm": True, "vllm_mode": "colocate"})


def test_grpo_config_takes_the_options_as_documented(tmp_path: Path) -> None:
    from trl import GRPOConfig

    options = {"vllm_mode": "server", "vllm_server_base_url": "http://127.0.0.1:8000",
               "vllm_gpu_memory_utilization": 0.3, "vllm_tensor_parallel_size": 1}
    config = GRPOConfig(output_dir=str(tmp_path), use_vllm=False, use_cpu=True, report_to="none", **options)
    assert config.vllm_mode == "server" and config.vllm_server_base_url == "http://127.0.0.1:8000"
