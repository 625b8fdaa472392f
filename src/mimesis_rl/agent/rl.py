"""Agent RL: multi-turn GRPO against a frozen user, with TRL's `GRPOTrainer` and the rollout engine.

    python -m tasks.agent_rl --variant assistant   # (DVC runs one stage per training user, see dvc.yaml)
    accelerate launch --config_file infra/accelerate/cpu_multi.yaml -m mimesis_rl.agent.rl PAYLOAD.json

One GRPO step: TRL hands `rollout_func` the step's prompts ("<domain> <episode seed>", each repeated
`num_generations` times in a row); `run_rollouts` plays the whole dialogues in lockstep (one batched
generate per side per round, per-dialogue KV reuse) with the agent = the policy being trained (its
LoRA adapter `default`, sampled at the trainer's temperature) and the user = a frozen party on the same
base (`agent.users.UserFactory`: the assistant-prompted base with adapters off, a learned simulator as
the frozen adapter `user`, or a scripted user). The engine's token record goes back to TRL as
`prompt_ids`/`completion_ids`/`logprobs`/`env_mask`, so only the agent's own tokens carry loss; the
reward is outcome first (`rl_reward`: success, the verifier's partial credit, a cost per agent turn,
weighted by `agent_rl.reward`). The trainer is `agent.grpo`'s
`AgentGRPOTrainer` (or CSD's subclass of it, `agent.csd.trainer.CSDTrainer`).

This module is the stage: train, evaluate before/after and at the curve's steps (`rl_curve`), save, and
the `accelerate launch` worker.
The settings are `rl_settings.AgentRLSettings`, the dataset, `rollout_func` and reward `rl_rollout`,
the trainer's assembly `rl_trainer.build_trainer`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from mimesis_rl.agent.grpo import ExtraLoss
from mimesis_rl.agent.rl_curve import CURVE_FILE, GreedyEvaluations, curve_callback
from mimesis_rl.agent.rl_settings import AgentRLSettings
from mimesis_rl.agent.rl_trainer import build_trainer
from mimesis_rl.fsutil import write_json
from mimesis_rl.models.inference.runner import ModelRunner
from mimesis_rl.training.checkpoints import checkpoint_folder, finish, train
from mimesis_rl.training.curves import read_curve
from mimesis_rl.training.launch import worker_main
from mimesis_rl.training.trainers import first_last

log = logging.getLogger(__name__)


def reward_curve(history: list[dict[str, Any]], path: str | Path, title: str) -> Path:
    """PNG of reward (mean ± std) and success per step from the trainer's log history."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [e for e in history if "reward" in e]
    steps = [e.get("step", i + 1) for i, e in enumerate(rows)]
    mean = [e["reward"] for e in rows]
    std = [e.get("reward_std", 0.0) for e in rows]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, mean, marker="o", label="reward (outcome first, − turn cost)")
    ax.fill_between(
        steps,
        [m - s for m, s in zip(mean, std, strict=True)],
        [m + s for m, s in zip(mean, std, strict=True)],
        alpha=0.2,
    )
    dead = [e.get("groups/dead_share") for e in rows]
    if all(d is not None for d in dead):
        ax.plot(steps, dead, linestyle="--", label="dead-group share")
    ax.set_xlabel("GRPO step")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def _pop_dialogues(result: dict[str, Any]) -> dict[str, Any]:
    return {domain: per.pop("dialogues") for domain, per in result.items() if "dialogues" in per}


def train_agent_rl(
    settings: AgentRLSettings, seed: int = 0, extra_loss: ExtraLoss | None = None
) -> dict[str, Any]:
    """Train, evaluate (greedy, on the training user) before/after and along the curve, save the agent;
    returns metrics (with `curve`: the points, when `curve.enabled`)."""
    import mlflow

    from mimesis_rl.agent.artifact import LONGEST_TURN, recorded_longest_turn, save_agent, turn_budget_problem
    from mimesis_rl.agent.evaluate import evaluate, paired_gain
    from mimesis_rl.rollout import ModelAgent

    budget = turn_budget_problem(settings.sft_dir, settings.agent_max_new_tokens)
    if budget:  # the rollouts would cut the warm start's final actions: every such dialogue fails
        log.warning("agent_rl: %s", budget)
    checkpoint_dir, resume = checkpoint_folder(settings, seed, "")  # prompts follow from settings + seed
    trainer = build_trainer(settings, seed, extra_loss, output_dir=checkpoint_dir)
    model, tokenizer = trainer.model, trainer.processing_class
    eval_domains = settings.eval_domains or settings.domain_list
    eval_seeds = [10**7 + i for i in range(settings.eval_seeds)]
    users = {settings.user: trainer.user_factory}

    def score(adapter: str) -> dict[str, Any]:
        runner = ModelRunner(model, tokenizer, settings.generation, adapter=adapter, seed=seed)
        agent = ModelAgent(runner)
        scores = evaluate(agent, users, eval_domains, eval_seeds, settings.max_turns, keep_dialogues=True)
        return scores[settings.user]

    main = trainer.is_world_process_zero()  # under `accelerate launch` only process 0 writes reports
    evals = GreedyEvaluations(score, checkpoint_dir, main)  # each step's evaluation once, kept for a resume
    with_curve = settings.curve.enabled and settings.eval_seeds > 0
    curve = None
    if with_curve:  # added last: the step timer does not count the evaluation
        curve = curve_callback(evals, settings.curve, int(trainer.args.max_steps), checkpoint_dir)
        trainer.add_callback(curve)
    before = evals.at(0) if settings.eval_seeds else {}
    spent_before = evals.spent
    _, trained = train(trainer, resume)
    # the curve's points run inside training: their time is evaluation's, not training's
    train_seconds = trained["train_seconds"] - (evals.spent - spent_before)
    # "after" is the agent saved: the curve's last point, or the point `curve.select` kept
    saved_step = curve.restored if curve is not None and curve.restored is not None else trained["steps"]
    after = evals.at(saved_step) if settings.eval_seeds else {}
    eval_seconds = evals.spent
    history = trainer.state.log_history
    report = Path(settings.report_dir)
    if main:
        report.mkdir(parents=True, exist_ok=True)
        curve = reward_curve(
            history, report / "reward_curve.png", f"agent_rl · {settings.variant} vs {settings.user}"
        )
        if mlflow.active_run() is not None:
            mlflow.log_artifact(str(curve), artifact_path="agent_rl")
    timing = {k: round(sum(v) / len(v), 3) for k, v in trainer.timing.items() if v}
    metrics: dict[str, Any] = {
        "variant": settings.variant,
        "user": settings.user,
        "steps": trained["steps"],
        "resumed_from_step": trained["resumed_from_step"],
        "train_loss": trained["train_loss"],
        "train_seconds": round(train_seconds, 2),
        "eval_seconds": round(eval_seconds, 2),
        **first_last(history, "reward", "reward"),
        **first_last(history, "rewards/success/mean", "sampled_success"),  # the reward's parts, sampled
        **first_last(history, "rewards/verifier/mean", "sampled_verifier"),
        "frac_reward_zero_std": [e.get("frac_reward_zero_std") for e in history if "reward" in e],
        "mean_seconds": timing,
        "eval_before": before,
        "eval_after": after,
    }
    if budget:
        metrics["turn_budget_problem"] = budget
    if with_curve:  # the greedy evaluation at curve_steps(max_steps): MLflow `curve.*` are logged per step
        metrics["curve"] = read_curve(checkpoint_dir / CURVE_FILE)
        metrics["saved_step"] = saved_step
    if before and after:
        metrics["success_gain"] = round(after["mean"]["success_rate"] - before["mean"]["success_rate"], 4)
        metrics["reward_gain"] = round(after["mean"]["mean_reward"] - before["mean"]["mean_reward"], 4)
        metrics["paired_gain"] = {k: paired_gain(before, after, k) for k in ("reward", "success")}
    outcomes = {when: _pop_dialogues(res) for when, res in (("before", before), ("after", after)) if res}
    if outcomes and main:  # per dialogue: an artifact, not hundreds of MLflow metrics
        write_json(report / "eval_dialogues.json", outcomes)
    finish(trainer, settings, checkpoint_dir, lambda: save_agent(
        model,
        tokenizer,
        settings.output_dir,
        settings.base_model,
        settings.generation,
        "agent_rl",
        extra={
            "variant": settings.variant,
            "user": settings.user,
            "csd": dict(settings.csd),
            "sft_dir": settings.sft_dir,
            LONGEST_TURN: recorded_longest_turn(settings.sft_dir),
        },
    ))
    return metrics


def run_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A worker's job under `accelerate launch`: the payload `tasks.agent_rl` writes."""
    return train_agent_rl(AgentRLSettings.from_section(payload["settings"]), seed=int(payload.get("seed", 0)))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    worker_main("mimesis_rl.agent.rl", run_payload)
