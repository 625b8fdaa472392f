"""Agent GRPO with real TRL on a tiny model: the env mask really masks, rows come back in TRL's order,
one step runs end to end against a learned user (frozen adapter on the same base), the result is
registered and playable through the `model:` resolver."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import mlflow
import pytest
import torch
from datasets import Dataset
from peft import LoraConfig, get_peft_model
from rollout_support import load_tiny, one_thread, same_adapter, tiny_dir  # noqa: F401

from mimesis_rl.agent.artifact import save_agent
from mimesis_rl.agent.grpo import AgentGRPOTrainer
from mimesis_rl.agent.rl import train_agent_rl
from mimesis_rl.agent.rl_rollout import make_rollout_func, prompt_rows
from mimesis_rl.agent.rl_settings import AgentRLSettings
from mimesis_rl.agent.rl_trainer import build_trainer
from mimesis_rl.agent.users import UserFactory
from mimesis_rl.models.artifact import ModelManifest, base_reference, write_manifest
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.lora import save_adapter, switch_adapter
from mimesis_rl.simulator.format import format_spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _lora(alpha: int = 64) -> LoraConfig:
    return LoraConfig(
        r=4,
        lora_alpha=alpha,
        target_modules=["q_proj", "v_proj", "o_proj"],
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )


def _policy(tiny_dir: Path) -> tuple[Any, Any]:  # noqa: F811
    """Trainable `default` + frozen `ref` (random non-trivial LoRA: a random base repeats one token)."""
    model, tok = load_tiny(tiny_dir)
    torch.manual_seed(1)
    peft = get_peft_model(model, _lora(), adapter_name="default")
    peft.add_adapter("ref", _lora())
    switch_adapter(peft, "default", trainable=True)
    return peft, tok


def _varied_reward(completions: list[Any], episode_id: list[str], **_: Any) -> list[float]:
    """Distinct rewards inside every group, so advantages are non-zero."""
    return [float(i % 3) + 0.01 * len(c[0]["content"]) for i, c in enumerate(completions)]


def _trainer(
    tmp_path: Path,
    model: Any,
    tok: Any,
    base: Path,
    *,
    user: str = "scripted:cooperative",
    domains: tuple[str, ...] = ("bargain",),
    batch: int = 4,
    k: int = 2,
    loss_type: str = "dapo",
    reward: Any = _varied_reward,
    extra_loss: Any = None,
) -> AgentGRPOTrainer:
    from trl import GRPOConfig

    users = UserFactory(user, model, tok, SamplingParams(max_new_tokens=6, do_sample=True), base_model=base)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=batch,
        num_generations=k,
        max_steps=1,
        learning_rate=1e-2,
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        beta=0.0,
        loss_type=loss_type,
        seed=0,
        temperature=1.0,
        max_completion_length=4096,
        dataloader_num_workers=0,
    )
    rows = prompt_rows(list(domains), max(1, batch // k // len(domains)))
    return AgentGRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        extra_loss=extra_loss,
        rollout_func=make_rollout_func(users, tok, SamplingParams(max_new_tokens=6), 2),
    )


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_non_agent_tokens_get_exactly_zero_gradient(tiny_dir, tmp_path, monkeypatch, loss_type):  # noqa: F811
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = _policy(tiny_dir)
    trainer = _trainer(tmp_path, model, tok, tiny_dir, loss_type=loss_type)
    captured: list[torch.Tensor] = []
    original = trainer._get_per_token_logps_and_entropies

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        if torch.is_grad_enabled():
            out[0].retain_grad()
            captured.append(out[0])
        return out

    monkeypatch.setattr(trainer, "_get_per_token_logps_and_entropies", spy)
    model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop, which this test steps by hand
    batch = next(iter(trainer.get_train_dataloader()))
    inputs = trainer._prepare_inputs(batch)
    assert inputs["advantages"].abs().sum() > 0, "test needs non-zero advantages"
    loss = trainer.compute_loss(model, inputs)
    loss.backward()
    grad = captured[-1].grad
    agent = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
    other = inputs["completion_mask"].bool() & ~agent
    assert other.sum() > 0, "no user/template tokens inside the completions: nothing tested"
    assert torch.count_nonzero(grad[other]) == 0
    assert torch.count_nonzero(grad[agent]) > 0
    # and the LoRA weights got a gradient through the agent tokens only
    assert any(
        p.grad is not None and p.grad.abs().sum() > 0 for n, p in model.named_parameters() if ".default." in n
    )
    assert all(p.grad is None for n, p in model.named_parameters() if ".ref." in n)


def test_rows_in_trl_order_with_groups(tiny_dir, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = _policy(tiny_dir)
    trainer = _trainer(tmp_path, model, tok, tiny_dir, domains=("bargain", "tutoring"), batch=6, k=3)
    # what TRL's RepeatSampler hands over: each prompt num_generations times in a row, domains mixed
    prompts = [
        [{"role": "user", "content": f"{d} {s}"}]
        for d, s in [("tutoring", 5), ("bargain", 7), ("tutoring", 9)]
        for _ in range(3)
    ]
    out = trainer.rollout_func(prompts, trainer)
    episodes = trainer._pending_episodes
    for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "reward", "episode_id"):
        assert len(out[key]) == 9, key
    assert out["episode_id"] == [
        f"{d}-{s}#{k}" for d, s in [("tutoring", 5), ("bargain", 7), ("tutoring", 9)] for k in range(3)
    ]
    for i in range(9):
        assert len(out["completion_ids"][i]) == len(out["env_mask"][i]) == len(out["logprobs"][i])
        assert episodes[i]["episode_id"] == out["episode_id"][i]
        assert episodes[i]["prompt_len"] == len(out["prompt_ids"][i])
        for start, end in episodes[i]["agent_spans"]:  # agent spans are exactly the env_mask-1 runs
            assert all(out["env_mask"][i][start:end])
        assert sum(e - s for s, e in episodes[i]["agent_spans"]) == sum(out["env_mask"][i])
    for g in range(3):  # one group = one episode seed: same goal, same user opening (user seeded per group)
        group = episodes[3 * g : 3 * g + 3]
        assert len({json.dumps(e["goal"], sort_keys=True) for e in group}) == 1
        assert len({e["turns"][0]["content"] for e in group}) == 1
        assert len({tuple(out["prompt_ids"][3 * g + k]) for k in range(3)}) == 1
    # and through TRL itself: the scored batch keeps rows and groups in order, records attached
    model.train()
    batch = next(iter(trainer.get_train_dataloader()))
    scored = trainer._generate_and_score_completions(batch)
    eps = scored["episodes"]
    assert len(eps) == scored["completion_ids"].shape[0] == 6
    assert [e["seed"] for e in eps[:3]] == [eps[0]["seed"]] * 3
    assert [e["episode_id"][-2:] for e in eps] == ["#0", "#1", "#2"] * 2
    for g in range(2):
        assert abs(float(scored["advantages"][3 * g : 3 * g + 3].sum())) < 1e-3


def _simulator_folder(tiny_dir: Path, out: Path) -> Path:  # noqa: F811
    """A LoRA simulator folder in the trained turn format (random adapter: its words don't matter here)."""
    model, tok = load_tiny(tiny_dir)
    torch.manual_seed(3)
    peft = get_peft_model(model, _lora())
    save_adapter(peft, "default", out / "adapter")
    tok.save_pretrained(str(out / "tokenizer"))
    write_manifest(
        out,
        ModelManifest(
            kind="lora",
            role="simulator",
            base=base_reference(tiny_dir),
            format=format_spec(),
            generation={
                "max_new_tokens": 8,
                "do_sample": True,
                "temperature": 1.0,
                "top_k": 0,
                "top_p": 1.0,
                "max_retries": 0,
            },
        ),
    )
    return out


def test_grpo_step_against_learned_user_registered_and_playable(tiny_dir, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = _policy(tiny_dir)
    sft = save_agent(model, tok, tmp_path / "sft", tiny_dir, SamplingParams(max_new_tokens=8), "agent_sft")
    sim = _simulator_folder(tiny_dir, tmp_path / "sim")
    settings = AgentRLSettings.from_section(dict(
        variant="mimesis",
        user=f"learned:{sim}",
        sft_dir=str(sft),
        base_model=str(tiny_dir),
        domains=["bargain"],
        prompts_per_domain=2,
        max_turns=2,
        agent_max_new_tokens=6,
        user_max_new_tokens=6,
        max_steps=1,
        batch_size=4,
        num_generations=2,
        learning_rate=1e-2,
        eval_seeds=0,
        device="cpu",
        bf16=False,
        output_dir=str(tmp_path / "rl"),
        report_dir=str(tmp_path / "rep"),
        checkpoint_dir=str(tmp_path / "ck"),
    ))
    calls: list[int] = []

    def extra_loss(m: Any, inputs: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        calls.append(len(inputs["episodes"]))
        assert inputs["completion_ids"].shape[0] == len(inputs["episodes"])
        return torch.zeros((), requires_grad=False), {"csd/probe": 1.0}

    trainer = build_trainer(settings, extra_loss=extra_loss)
    trainer.reward_funcs[0] = _varied_reward
    policy = trainer.model
    assert set(policy.peft_config) == {"default", "ref", "user"}
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if ".ref." in n or ".user." in n}
    trained = {n: p.detach().clone() for n, p in policy.named_parameters() if ".default." in n}
    trainer.train()
    assert calls == [4]
    logged = trainer.state.log_history[0]
    for key in (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "success/bargain",
        "groups/dead_share",
        "kl_to_sft",
        "rollout/agent_tokens_per_s",
        "csd/probe",
    ):
        assert key in logged, key
    assert all(torch.equal(p, frozen[n]) for n, p in policy.named_parameters() if n in frozen)
    assert any(not torch.equal(p, trained[n]) for n, p in policy.named_parameters() if n in trained)
    assert trainer.user_factory.simulator.stats.total > 0  # the learned user really spoke

    # saved, registered, and played back through `mimesis envs rollout`'s resolver
    from mimesis_rl.agent.registry import log_agent
    from mimesis_rl.cli.envs import load_resolvers
    from mimesis_rl.envs.registry import make_env, scripted_user
    from mimesis_rl.envs.specs import make_agent
    from mimesis_rl.rollout import run_rollouts

    folder = save_agent(policy, tok, settings.output_dir, tiny_dir, settings.generation, "agent_rl")
    monkeypatch.setenv("MIMESIS_CACHE_DIR", str(tmp_path / "cache"))
    with mlflow.start_run():
        info = log_agent(folder, "mimesis", user=settings.user, data_version="test", csd=False)
    version = mlflow.MlflowClient().get_model_version_by_alias("mimesis-agent", "candidate-mimesis")
    assert str(version.version) == str(info["registered_version"])
    assert version.tags["mimesis.trained_against"] == settings.user
    assert version.tags["mimesis.csd"] == "false"
    assert len(version.tags["mimesis.simulator_md5"]) >= 32  # the simulator folder's DVC hash
    load_resolvers()  # as `mimesis envs rollout` does: this checkout's params.yaml, a fresh pool
    agent = make_agent("models:/mimesis-agent@candidate-mimesis", "bargain")
    result = run_rollouts(
        make_env("bargain", max_turns=1), agent, scripted_user("bargain"), [0], progress=False
    )
    assert result.states[0].agent_turns == 1
    assert copy.deepcopy(result.records()[0])["agent"].startswith("model:")


def test_agent_rl_resumes_from_its_last_checkpoint(tiny_dir, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = _policy(tiny_dir)
    sft = save_agent(model, tok, tmp_path / "sft", tiny_dir, SamplingParams(max_new_tokens=8), "agent_sft")
    settings = AgentRLSettings.from_section(dict(
        variant="assistant", user="scripted:cooperative", sft_dir=str(sft), base_model=str(tiny_dir),
        domains=["bargain"], prompts_per_domain=2, max_turns=1, agent_max_new_tokens=4, max_steps=2,
        batch_size=2, num_generations=2, eval_seeds=0, device="cpu", bf16=False, save_steps=1,
        keep_checkpoints=True, output_dir=str(tmp_path / "rl"), report_dir=str(tmp_path / "rep"),
        checkpoint_dir=str(tmp_path / "ck")))
    first = train_agent_rl(settings)
    assert first["resumed_from_step"] == 0 and first["steps"] == 2
    (run_dir,) = (tmp_path / "ck").iterdir()
    assert (run_dir / "checkpoint-2" / "adapter_model.safetensors").exists()
    again = train_agent_rl(settings)
    assert again["resumed_from_step"] == 2 and again["steps"] == 2
    same_adapter(run_dir / "checkpoint-2", tmp_path / "rl" / "adapter")  # the weights came back too


def test_agent_rl_curve_points_at_their_steps_and_reward_parts(tiny_dir, tmp_path, monkeypatch):  # noqa: F811
    """The greedy evaluation at curve_steps(4) = 0, 1, 2, 4: its ends are eval_before/eval_after (run
    once), in the metrics and in MLflow per step; a resumed run keeps the points and evaluates nothing."""
    from mimesis_rl.agent.rl_curve import CURVE_KEYS

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tok = _policy(tiny_dir)
    sft = save_agent(model, tok, tmp_path / "sft", tiny_dir, SamplingParams(max_new_tokens=8), "agent_sft")
    settings = AgentRLSettings.from_section(dict(
        variant="assistant", user="scripted:cooperative", sft_dir=str(sft), base_model=str(tiny_dir),
        domains=["bargain"], prompts_per_domain=2, max_turns=1, agent_max_new_tokens=4, max_steps=4,
        batch_size=2, num_generations=2, eval_seeds=1, generation={"max_new_tokens": 8, "do_sample": False},
        curve={"enabled": True, "fractions": [0.0, 0.25, 0.5, 1.0],
               "select": ["success_rate", "mean_reward"]},
        reward={"success": 1.0, "verifier": 0.2, "turn_cost": 0.02}, device="cpu", bf16=False,
        save_steps=2, keep_checkpoints=True, output_dir=str(tmp_path / "rl"),
        report_dir=str(tmp_path / "rep"), checkpoint_dir=str(tmp_path / "ck")))
    with mlflow.start_run() as run:
        first = train_agent_rl(settings)
    curve = first["curve"]
    assert [p["step"] for p in curve] == [0, 1, 2, 4]
    # the agent saved is the best point's (ties: the later step), and eval_after is its evaluation
    best = max(curve, key=lambda p: (p["success_rate"], p["mean_reward"], p["step"]))
    assert first["saved_step"] == best["step"]
    if best["step"] in (2, 4):  # a kept checkpoint holds that step's weights
        (run_dir,) = (tmp_path / "ck").iterdir()
        same_adapter(run_dir / f"checkpoint-{best['step']}", tmp_path / "rl" / "adapter")
    for key in CURVE_KEYS:
        assert curve[0][key] == first["eval_before"]["mean"][key]
        assert best[key] == first["eval_after"]["mean"][key]
        assert all(0.0 <= p[key] <= 1.0 for p in curve if key != "mean_reward")
    assert all(p["eval_seconds"] > 0 for p in curve)  # each point's evaluation really ran, once
    assert first["eval_seconds"] == pytest.approx(sum(p["eval_seconds"] for p in curve), abs=0.05)
    client = mlflow.MlflowClient()
    for key in CURVE_KEYS:
        history = client.get_metric_history(run.info.run_id, f"curve.{key}")
        assert sorted((m.step, m.value) for m in history) == [(p["step"], p[key]) for p in curve]
    # the reward's parts per step, and TRL's total is their weighted sum
    logged = client.get_run(run.info.run_id).data.metrics  # the last step's values
    parts = {k: logged[f"agent_rl.rewards.{k}.mean"] for k in ("success", "verifier", "agent_turns")}
    assert logged["agent_rl.reward"] == pytest.approx(
        parts["success"] + 0.2 * parts["verifier"] - 0.02 * parts["agent_turns"], abs=1e-5)
    assert first["last_sampled_success"] == pytest.approx(parts["success"])
    assert first["last_sampled_verifier"] == pytest.approx(parts["verifier"])

    again = train_agent_rl(settings)  # resumed at its last checkpoint (4): every evaluation is kept
    assert again["resumed_from_step"] == 4 and again["eval_seconds"] == 0.0
    assert again["curve"] == curve
    assert again["eval_after"]["mean"] == first["eval_after"]["mean"]
