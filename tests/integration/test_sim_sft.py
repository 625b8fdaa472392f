"""Simulator SFT on a tiny real model: only simulator tokens are in the loss, the loss goes down,
an interrupted run resumes from its checkpoint, metrics land in the stage's MLflow run, and the
DeepSpeed configs are valid (with a ZeRO-2 step on CPU)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow
import pytest
import torch
from transformers import TrainerCallback

from mimesis_rl.data.jsonl import read_conversations
from mimesis_rl.models.artifact import MANIFEST, read_manifest
from mimesis_rl.models.chat_template import END_OF_TURN
from mimesis_rl.simulator.dialogue import user_left
from mimesis_rl.simulator.format import render_target
from mimesis_rl.simulator.sft import SFTSettings, build_trainer, train_sft
from mimesis_rl.simulator.sft_data import sft_examples
from mimesis_rl.tracking import stage_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mimesis_rl.models.testing import make_tiny_base

    convs = read_conversations(REPO / "tests" / "fixtures" / "sim" / "conversations.jsonl")
    texts = [m["content"] for ex in sft_examples(convs) for m in ex["messages"]]
    return make_tiny_base(tmp_path_factory.mktemp("sim-base") / "base", texts=texts * 3)


def _settings(base: Path, tmp_path: Path, **overrides: Any) -> SFTSettings:
    fixture = str(REPO / "tests" / "fixtures" / "sim" / "conversations.jsonl")
    section = {"train": fixture, "val": fixture, "base_model": str(base), "device": "cpu", "max_length": 384,
               "batch_size": 4, "max_steps": 6, "learning_rate": 2e-2, "warmup_ratio": 0.0,
               "logging_steps": 1, "save_steps": 3, "output_dir": str(tmp_path / "sft"),
               "checkpoint_dir": str(tmp_path / "ckpt"),
               "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"}}
    return SFTSettings.from_section({**section, **overrides})


def test_only_simulator_tokens_are_in_the_loss(tiny_base: Path, tmp_path: Path) -> None:
    convs = read_conversations(REPO / "tests" / "fixtures" / "sim" / "conversations.jsonl")
    trainer = build_trainer(_settings(tiny_base, tmp_path, max_length=4096), convs, [], tmp_path / "ck")
    tokenizer = trainer.processing_class
    for conv, row in zip(convs, trainer.train_dataset, strict=True):
        kept = [tok for tok, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100]
        expected = "".join(render_target(t.reasoning, t.content, user_left(conv, i)) + END_OF_TURN
                           for i, t in enumerate(conv.turns) if t.role == "user")
        assert tokenizer.decode(kept) == expected  # the agent's turns and the system card are never targets


class _Interrupt(TrainerCallback):
    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == 4:
            raise KeyboardInterrupt("simulated interruption")


def test_loss_decreases_resumes_and_logs_into_the_stage_run(tiny_base: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(tiny_base, tmp_path)
    convs = read_conversations(settings.train)
    before = build_trainer(settings, convs, convs, tmp_path / "probe").evaluate()["eval_loss"]

    # First attempt dies after step 4; the checkpoint of step 3 survives outside the output folder.
    import mimesis_rl.simulator.sft as sft

    real_build = sft.build_trainer
    monkeypatch.setattr(sft, "build_trainer",
                        lambda *a, **k: real_build(*a, **{**k, "extra_callbacks": [_Interrupt()]}))
    with pytest.raises(KeyboardInterrupt):
        train_sft(settings, seed=0)
    monkeypatch.setattr(sft, "build_trainer", real_build)
    assert not Path(settings.output_dir).exists()
    assert list(Path(settings.checkpoint_dir).glob("*/checkpoint-3"))

    with stage_run("sim_sft", {"profile": "test"}) as run:
        metrics = train_sft(settings, seed=0)
    assert metrics["resumed_from_step"] == 3 and metrics["steps"] == 6
    assert metrics["eval_loss"] < before - 0.05, (before, metrics["eval_loss"])
    assert not list(Path(settings.checkpoint_dir).glob("*/checkpoint-*"))  # cleaned after success

    manifest = read_manifest(settings.output_dir)
    assert manifest.kind == "lora" and manifest.base["path"] == str(tiny_base)
    assert (Path(settings.output_dir) / "adapter" / "adapter_config.json").exists()

    client = mlflow.MlflowClient()
    runs = client.search_runs([run.info.experiment_id])
    assert [r.info.run_id for r in runs] == [run.info.run_id]  # no stray top-level run from the trainer
    history = client.get_metric_history(run.info.run_id, "sft.loss")
    assert [m.step for m in history] == [4, 5, 6]  # logged while training, after the resume


def test_deepspeed_configs_are_valid_without_a_gpu() -> None:
    import types

    from deepspeed.runtime.config import DeepSpeedConfig
    from transformers import LlamaConfig, TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    for stage, name in ((2, "zero2"), (3, "zero3")):
        path = REPO / "infra" / "deepspeed" / f"{name}.json"
        json.loads(path.read_text())
        args = TrainingArguments(output_dir="unused", per_device_train_batch_size=4,
                                 gradient_accumulation_steps=2, use_cpu=True, report_to="none")
        config = HfTrainerDeepSpeedConfig(str(path))
        config.trainer_config_process(args)
        config.trainer_config_finalize(args, types.SimpleNamespace(config=LlamaConfig(hidden_size=64)), 100)
        ds = DeepSpeedConfig(config.config)
        assert ds.zero_optimization_stage == stage
        assert ds.train_batch_size == 8 and ds.gradient_accumulation_steps == 2


def test_accelerate_configs_load() -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    for path in sorted((REPO / "infra" / "accelerate").glob("*.yaml")):
        config = load_config_from_file(str(path))
        ds_file = (getattr(config, "deepspeed_config", None) or {}).get("deepspeed_config_file")
        if ds_file:
            assert (REPO / ds_file).is_file(), f"{path.name}: {ds_file} missing"


@pytest.fixture
def single_process_group(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A one-rank gloo world for DeepSpeed on CPU, torn down afterwards (env, accelerate state, group)."""
    import torch.distributed as dist
    from accelerate.state import AcceleratorState

    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29531", "RANK": "0", "WORLD_SIZE": "1",
                       "LOCAL_RANK": "0", "ACCELERATE_USE_DEEPSPEED": "false"}.items():
        monkeypatch.setenv(key, value)  # HF sets ACCELERATE_USE_DEEPSPEED=true; monkeypatch restores it
    yield
    AcceleratorState._reset_state(True)
    if dist.is_initialized():
        dist.destroy_process_group()


def test_zero2_step_on_cpu(tiny_base: Path, tmp_path: Path, single_process_group: Any) -> None:
    pytest.importorskip("deepspeed")
    settings = _settings(tiny_base, tmp_path, max_steps=2, save_steps=100, val=None, max_length=256,
                         deepspeed=str(REPO / "infra" / "deepspeed" / "zero2.json"))
    metrics = train_sft(settings, seed=0)
    assert metrics["steps"] == 2
    assert (Path(settings.output_dir) / "adapter" / "adapter_model.safetensors").exists()


def test_accelerate_launcher_logs_into_the_stage_run(tiny_base: Path, tmp_path: Path) -> None:
    """`launcher: accelerate` on CPU (infra/accelerate/cpu.yaml): a worker process trains and its
    metrics land in the calling stage's MLflow run."""
    from mimesis_rl.training.launch import launch_worker

    cpu_config = str(REPO / "infra" / "accelerate" / "cpu.yaml")
    settings = _settings(tiny_base, tmp_path, max_steps=2, save_steps=100, val=None, max_length=256,
                         launcher="accelerate", accelerate_config=cpu_config)
    with stage_run("sim_sft", {"profile": "test"}) as run:
        metrics = launch_worker("mimesis_rl.simulator.sft", {"settings": settings.to_json(), "seed": 0},
                                settings.accelerate_config, root=REPO)
    assert metrics["steps"] == 2
    assert read_manifest(settings.output_dir).kind == "lora"
    history = mlflow.MlflowClient().get_metric_history(run.info.run_id, "sft.loss")
    assert [m.step for m in history] == [1, 2]



def test_packed_examples_see_only_themselves(tiny_base: Path, tmp_path: Path) -> None:
    """TRL's padding-free packing (`packing: true`, `bfd`) puts several examples in one row with
    restarting position ids; each example's logits must equal the example run alone."""
    import torch

    convs = read_conversations(REPO / "tests" / "fixtures" / "sim" / "conversations.jsonl")
    trainer = build_trainer(_settings(tiny_base, tmp_path, packing=True, packing_strategy="bfd",
                                      max_length=1024, bf16=False), convs, [], tmp_path / "ck")
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 1
    positions = batch["position_ids"][0]
    starts = (positions == 0).nonzero().flatten().tolist() + [len(positions)]
    assert len(starts) > 2, "the test needs a row holding at least two examples"
    model = trainer.model.eval()
    with torch.no_grad():  # use_cache off, as TRL's compute_loss has it: only then is the packing seen
        packed = model(**{k: v for k, v in batch.items() if k != "labels"}, use_cache=False).logits[0]
        for begin, end in zip(starts, starts[1:], strict=False):
            alone = model(input_ids=batch["input_ids"][:, begin:end]).logits[0]
            assert torch.allclose(packed[begin:end], alone, atol=1e-4)


def test_verdict_tokens_weigh_more_in_the_loss(tiny_base: Path, tmp_path: Path) -> None:
    """`env.verdict_weight`: the collator marks exactly the verdict span's tokens, all of them trained,
    and the trainer's loss is sum(weight x token NLL) / trained tokens, against the model's own logits."""
    import torch

    convs = read_conversations(REPO / "tests" / "fixtures" / "sim" / "conversations.jsonl")
    env = {"share": 0.5, "domains": ["bargain", "campsite"], "presets": ["cooperative"],
           "episodes_per_domain": 1, "decision_items": 6, "decision_focus": True, "verdict_weight": 4.0}
    trainer = build_trainer(_settings(tiny_base, tmp_path, env=env, max_length=1024, bf16=False), convs, [],
                            tmp_path / "ck")
    rows = [row for row in trainer.train_dataset if row["weighted_span"]][:4]
    assert len(rows) >= 2
    collator = trainer.data_collator
    batch = collator(rows)
    assert collator.found == collator.asked == len(rows)
    weights = batch["loss_weights"]
    for i, row in enumerate(rows):
        marked = weights[i] == 4.0
        assert trainer.processing_class.decode(batch["input_ids"][i][marked]) == row["weighted_span"]
        assert (batch["labels"][i][marked] != -100).all()
    assert int((weights != 1.0).sum()) == sum(
        len(trainer.processing_class(r["weighted_span"], add_special_tokens=False).input_ids) for r in rows)

    model = trainer.model.eval()
    with torch.no_grad():
        weighted = trainer.compute_loss(model, dict(batch))
        plain = trainer.compute_loss(model, {k: v for k, v in batch.items() if k != "loss_weights"})
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    labels = batch["labels"][:, 1:]
    trained = labels != -100
    nll = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), labels.clamp(min=0),
                                            reduction="none") * trained
    assert torch.allclose(weighted, (nll * weights[:, 1:]).sum() / trained.sum(), rtol=1e-4)
    assert torch.allclose(plain, nll.sum() / trained.sum(), rtol=1e-4)
    assert weighted > plain


def test_onpolicy_windows_train_the_relabelled_reply_alone(tiny_base: Path, tmp_path: Path) -> None:
    """`env.onpolicy_*`: relabelled decisions join the environment pool at their share; in the batch,
    only their last reply keeps its labels (the played turns before it are context), and a proposal's
    verdict span is still found and weighed."""
    from mimesis_rl.envs.loop import play
    from mimesis_rl.envs.registry import make_env, scripted_agent, scripted_user
    from mimesis_rl.simulator.onpolicy import LAST_TURN_COLUMN, relabelled

    states = play(make_env("bargain"), scripted_agent("bargain"), scripted_user("bargain", "train_mix"),
                  [11, 12, 13])
    onpolicy = relabelled(states)
    convs = read_conversations(REPO / "tests" / "fixtures" / "sim" / "conversations.jsonl")
    env = {"share": 0.5, "domains": ["bargain"], "presets": ["cooperative"], "episodes_per_domain": 2,
           "verdict_weight": 4.0, "onpolicy_share": 0.5}
    trainer = build_trainer(_settings(tiny_base, tmp_path, env=env, max_length=2048, bf16=False), convs, [],
                            tmp_path / "ck", onpolicy=onpolicy)
    flags = trainer.train_dataset[LAST_TURN_COLUMN]
    assert 0 < sum(flags) < len(flags)
    rows = [row for row in trainer.train_dataset if row[LAST_TURN_COLUMN]][:6]
    batch = trainer.data_collator(rows)
    tokenizer = trainer.processing_class
    for i, row in enumerate(rows):
        kept = batch["input_ids"][i][batch["labels"][i] != -100]
        assert tokenizer.decode(kept) == row["messages"][-1]["content"] + END_OF_TURN
        assert sum(label != -100 for label in row["labels"]) > len(kept)  # its own turns were targets
        if row["weighted_span"]:
            assert row["weighted_span"] in row["messages"][-1]["content"]
    assert any(row["weighted_span"] for row in rows)
    assert trainer.data_collator.found == trainer.data_collator.asked > 0


def test_onpolicy_dialogues_replay_the_warm_start_and_are_kept_for_a_rerun(tiny_base: Path,
                                                                         tmp_path: Path) -> None:
    """`env.onpolicy_dialogues`: the simulator a run continues plays the scripted agent first; its
    relabelled decisions are written beside the checkpoints and read back, not replayed, by a rerun;
    without a warm start there is nothing to replay and the run says so."""
    from mimesis_rl.simulator.sft import onpolicy_decisions

    first = _settings(tiny_base, tmp_path / "first", max_steps=2, save_steps=2)
    train_sft(first, seed=0)
    env = {"share": 0.5, "domains": ["bargain"], "presets": ["cooperative"], "episodes_per_domain": 1,
           "onpolicy_dialogues": 2}
    warm = _settings(tiny_base, tmp_path / "warm", warm_start=first.output_dir, env=env)
    played = onpolicy_decisions(warm, tmp_path / "ck")
    assert (tmp_path / "ck" / "onpolicy.jsonl").exists()
    assert played
    assert all(c.outcome["preset"] == "onpolicy" and c.turns[-1].meta.get("decision") for c in played)
    assert onpolicy_decisions(warm, tmp_path / "ck") == played
    with pytest.raises(ValueError, match="warm_start"):
        onpolicy_decisions(_settings(tiny_base, tmp_path, env=env), tmp_path / "ck2")


def test_warm_start_trains_on_from_a_saved_adapter(tiny_base: Path, tmp_path: Path) -> None:
    """`warm_start`: the trainer's adapter begins as the saved simulator's, trainable, under no new LoRA;
    a folder trained on another base is refused by name."""
    import torch
    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file

    first = _settings(tiny_base, tmp_path / "first", max_steps=2, save_steps=2)
    train_sft(first, seed=0)
    saved = load_file(Path(first.output_dir) / "adapter" / "adapter_model.safetensors")
    assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in saved.items())  # it trained

    convs = read_conversations(first.train)
    warm = _settings(tiny_base, tmp_path / "warm", warm_start=first.output_dir)
    trainer = build_trainer(warm, convs, [], tmp_path / "ck")
    start = get_peft_model_state_dict(trainer.model)
    assert set(start) == set(saved)
    for key, value in saved.items():
        assert torch.equal(start[key].float(), value.float()), key
    assert all(p.requires_grad for n, p in trainer.model.named_parameters() if "lora_" in n)
    trainer.train()
    moved = get_peft_model_state_dict(trainer.model)
    assert any(not torch.equal(moved[k].float(), saved[k].float()) for k in saved)

    with pytest.raises(ValueError, match="not a saved simulator of method 'full'"):  # a LoRA, not a model
        build_trainer(_settings(tiny_base, tmp_path / "full", warm_start=first.output_dir, method="full"),
                      convs, [], tmp_path / "ck3")
    manifest_path = Path(first.output_dir) / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["base"]["manifest"] = {"built_from": "another model"}
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="another base"):
        build_trainer(warm, convs, [], tmp_path / "ck2")


def test_full_fine_tuning_phases_train_every_weight_of_one_model(tiny_base: Path, tmp_path: Path) -> None:
    """`method: full` with phases (issue 27's full fine-tuning route): each phase trains every weight of
    the model the previous one saved, in fp32, and the final settings continue the last phase's."""
    from safetensors.torch import load_file

    phases = [{"name": "verdicts", "trainer": {"max_steps": 2}}]
    settings = _settings(tiny_base, tmp_path, method="full", max_steps=1, save_steps=1, phases=phases,
                         keep_checkpoints=True)
    metrics = train_sft(settings, seed=0)
    weights = "model/model.safetensors"
    base = load_file(tiny_base / "model.safetensors")
    phase = load_file(tmp_path / "ckpt" / "phases" / "verdicts" / "model" / weights)
    final = load_file(Path(settings.output_dir) / weights)
    assert read_manifest(settings.output_dir).kind == "full" and metrics["phase.verdicts.steps"] == 2
    assert metrics["trainable_params"] == sum(v.numel() for v in phase.values())
    moved = [k for k in base if k in phase and not base[k].float().equal(phase[k].float())]
    assert len(moved) > len(base) // 2  # not an adapter's few matrices: the model's own weights
    assert any(not phase[k].equal(final[k]) for k in phase)  # the final settings trained on from it
    assert all(v.dtype == torch.float32 for v in final.values())


def test_phases_train_in_order_on_one_adapter_and_a_finished_phase_is_not_retrained(
        tiny_base: Path, tmp_path: Path) -> None:
    """`phases`: each phase continues the previous one's adapter with its own data and steps, the final
    settings continue the last; run again (as after a kill), a finished phase is kept, not retrained, and
    a changed phase retrains."""
    from safetensors.torch import load_file

    phases = [{"name": "verdicts", "trainer": {"max_steps": 2, "max_length": 256},
               "env": {"share": 0.5, "domains": ["bargain"], "episodes_per_domain": 1}},
              {"name": "dialogues", "trainer": {"max_steps": 1}}]
    settings = _settings(tiny_base, tmp_path, max_steps=1, save_steps=1, phases=phases, keep_checkpoints=True)
    metrics = train_sft(settings, seed=0)
    folder = tmp_path / "ckpt" / "phases"
    first, second = folder / "verdicts" / "model", folder / "dialogues" / "model"
    record = json.loads((first / "phase.json").read_text())
    assert record["metrics"]["steps"] == 2 and metrics["phase.dialogues.steps"] == 1
    assert metrics["phase.verdicts.train_examples"] == record["metrics"]["train_examples"]
    assert read_manifest(second).extra["data_hash"] == ""  # phases are plain runs of the same stage
    adapter = "adapter/adapter_model.safetensors"
    a, b, final = (load_file(f / adapter) for f in (first, second, Path(settings.output_dir)))
    assert set(a) == set(b) == set(final)  # one adapter all along
    assert any(not a[k].equal(b[k]) for k in a) and any(not b[k].equal(final[k]) for k in b)

    stamp = (first / "phase.json").stat().st_mtime_ns
    again = train_sft(settings, seed=0)
    assert (first / "phase.json").stat().st_mtime_ns == stamp  # kept, not retrained
    assert again["phase.verdicts.steps"] == 2

    changed = [{**phases[0], "trainer": {"max_steps": 1, "max_length": 256}}, phases[1]]
    train_sft(_settings(tiny_base, tmp_path, max_steps=1, save_steps=1, phases=changed,
                        keep_checkpoints=True), seed=0)
    assert json.loads((first / "phase.json").read_text())["metrics"]["steps"] == 1
    assert (second / "phase.json").stat().st_mtime_ns > stamp  # what follows a changed phase retrains

    train_sft(_settings(tiny_base, tmp_path, max_steps=1, save_steps=1, phases=changed), seed=0)
    assert not folder.exists()  # the curriculum's folders go with the checkpoints

    with pytest.raises(ValueError, match="belong to the whole stage"):
        _settings(tiny_base, tmp_path, phases=[{"name": "x", "output_dir": "elsewhere"}])
    with pytest.raises(ValueError, match="a name of its own"):
        _settings(tiny_base, tmp_path, phases=[{"name": "x"}, {"name": "x"}])
