"""`mimesis export` on a real tiny simulator (LoRA) registered in MLflow: the folder loads with
`transformers` alone in a clean subprocess (mimesis_rl not importable) and answers a goal card as
the user; the model card's front-matter passes huggingface_hub's parser."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from sim_support import tiny_base, tiny_simulator
from typer.testing import CliRunner

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLEAN_LOAD = r"""
import importlib.abc, json, sys

class NoMimesis(importlib.abc.MetaPathFinder):  # the venv has mimesis_rl installed: refuse it here
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mimesis_rl", "tasks", "flows"):
            raise ImportError(f"{name} is off limits in this probe")
        return None

sys.meta_path.insert(0, NoMimesis())
try:
    import mimesis_rl  # noqa: F401
    raise SystemExit("mimesis_rl was importable")
except ImportError:
    pass
from transformers import AutoModelForCausalLM, AutoTokenizer
path = sys.argv[1]
tok = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path)
card = "You are a real person (the user) in a conversation about shopping.\nYour goal: Buy a green jacket."
messages = [{"role": "system", "content": card}, {"role": "user", "content": "[chat opened]"}]
prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
ids = tok(prompt, return_tensors="pt", add_special_tokens=False).input_ids
out = model.generate(ids, max_new_tokens=12, do_sample=False)
text = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
print(json.dumps({"prompt_tail": prompt[-30:], "text": text, "new": int(out.shape[1] - ids.shape[1]),
                  "loaded": sorted(m for m in sys.modules if m.startswith("mimesis"))}))
"""


def test_export_a_registered_simulator_and_load_it_with_transformers_alone(tmp_path: Path) -> None:
    from mimesis_rl.cli import app
    from mimesis_rl.simulator.registry import log_simulator

    folder = tiny_simulator(tiny_base(tmp_path / "base"), tmp_path / "simulator", steps=2)
    mlflow.set_experiment("export")
    with mlflow.start_run():
        version = log_simulator(folder, alias="champion", data_version="d1", bundle="always")
    report = tmp_path / "fidelity.json"  # the shape sim_eval writes, one row
    report.write_text(json.dumps({"results": {"sft+rl": {"fidelity_index": 61.25, "turing_distance": 0.31}}}))
    out = tmp_path / "export"
    result = CliRunner().invoke(app, ["export", "models:/mimesis-simulator@champion", str(out),
                                      "--fidelity", str(report)])
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
            "generation_config.json", "README.md", "mimesis_export.json"} <= names
    assert not any(n.startswith("adapter") for n in names)  # merged, not an adapter
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["max_new_tokens"] == 24 and generation.get("do_sample", False) is False

    probe = subprocess.run([sys.executable, "-I", "-c", CLEAN_LOAD, str(out)], capture_output=True, text=True,
                           timeout=120, cwd=tmp_path, env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                                           "PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0, probe.stderr[-2000:]
    seen = json.loads(probe.stdout.strip().splitlines()[-1])
    assert seen["loaded"] == [] and seen["new"] > 0
    assert seen["prompt_tail"].endswith("<|im_start|>assistant\n<think>")  # the template plays the user

    from huggingface_hub import ModelCard

    card = ModelCard.load(out / "README.md")
    data = card.data.to_dict()
    assert data["license"] == "apache-2.0" and data["library_name"] == "transformers"
    assert "user-simulator" in data["tags"]
    assert f"`mimesis-simulator` version {version.version} (aliases: champion)" in card.text
    assert "- git commit: `" in card.text and "| fidelity_index | 61.25 |" in card.text
    assert "## How to prompt it" in card.text and "## Limits" in card.text and "## Fidelity" in card.text


def test_export_refuses_what_it_cannot_export(tmp_path: Path) -> None:
    from mimesis_rl.cli import app

    result = CliRunner().invoke(app, ["export", str(tmp_path / "nothing"), str(tmp_path / "out")])
    assert result.exit_code == 1 and "no such folder" in result.output
    assert not (tmp_path / "out").exists()


def test_export_an_agent_folder_keeps_the_assistant_template(tmp_path: Path) -> None:
    """An agent (LoRA over the tiny base, saved as agent_sft saves it) exports merged, with plain ChatML."""
    import torch
    from huggingface_hub import ModelCard
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file

    from mimesis_rl.agent.artifact import save_agent
    from mimesis_rl.export import export_model
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.loading import load_base

    base = tiny_base(tmp_path / "base")
    model, tok = load_base(base, dtype="float32", device="cpu")  # the export's own dtype
    torch.manual_seed(0)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"], init_lora_weights=False,
                      task_type="CAUSAL_LM")
    peft = get_peft_model(model, lora)
    folder = save_agent(peft, tok, tmp_path / "agent", base, SamplingParams(max_new_tokens=8), "agent_rl")
    merged = {k: v.clone() for k, v in peft.merge_and_unload().state_dict().items()}
    info = export_model(str(folder), tmp_path / "out", base_model=base)
    assert info.role == "agent"
    saved = load_file(str(tmp_path / "out" / "model.safetensors"))
    key = next(k for k in saved if "q_proj" in k)
    assert torch.allclose(saved[key], merged[key], atol=1e-6)  # the adapter is merged in, not dropped
    template = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text()).get("chat_template") or (
        tmp_path / "out" / "chat_template.jinja").read_text()
    assert "<think>" not in template
    assert "agent" in ModelCard.load(tmp_path / "out" / "README.md").data.to_dict()["tags"]
