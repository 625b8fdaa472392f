"""The simulator's learning curve (issue 27 item 5): what `sim_rl` buys at 0, ¼, ½ and all of its steps.

At each point (`training.curves.CurveCallback`), the model being trained, as it stands (its LoRA
adapter active, in eval mode), is wrapped in the one user runtime (`UserSimulator`) and measured on:

- `decision_accuracy`: a fixed held-out set of pending proposals (at, within and beyond the card's
  limit, per proposing domain; `simulator.decisions`), replayed with the model's own replies; the
  reply's decision is read as the environment reads it (`reply_accepts`, the `decision` reward's
  judge) and agrees or not with the card user's;
- `decision_gap`: on the same proposals, the yes-rate where the card accepts minus where it declines
  (`card_decisions`' effect, what `sim_eval` gates on): accuracy also rises for a user that declines
  everything on a set where most cards decline, the gap does not;
- `answers_accuracy`: question items of the same set; a reply answers when it states every asked
  slot's value (`rewards.answers.unanswered`, without the reward's credit for a named withholding);
- `env_success_rate`: the scripted agent against the model as user, `env_dialogues` seeded dialogues
  per domain, every domain in one lockstep batch (`envs.loop.play` over `MultiDomainEnv`).

The items and seeds are the same at every point and disjoint from the GRPO prompts' (`HELD_OUT_SEED`),
so the points differ by the weights only. A Turing-distance point is left out: the discriminator
`sim_rl` trains is the realism reward's target (the policy is optimised against it, so its AUC is
no held-out measure), and an honest one refits a discriminator on held-out real turns per point
(`sim_eval`'s method, in the eval layer).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.simulator.decisions import (
    PROPOSALS,
    DecisionItem,
    answer_forms,
    domain_items,
    episodes_for,
    replay_many,
)

HELD_OUT_SEED = 977  # decision items from seeds no GRPO prompt uses (rl_data draws with the run's seed)
ENV_SEED_BASE = 9_500_000  # environment dialogues of the curve (away from env_data's and evaluation's)
POINT_KEYS = ("env_success_rate", "decision_accuracy", "decision_gap", "answers_accuracy")


@dataclass(frozen=True)
class CurveSettings:
    """`sim_rl.curve`: enabled; fractions of max_steps to evaluate at; env_dialogues per domain;
    decision_prompts: held-out proposal items (spread over the proposing domains; as many question
    items, spread over the domains that have them); select: metric names, in order, by which the
    stage keeps its best point's weights instead of the last (`training.curves`; empty: the last)."""

    enabled: bool = False
    fractions: list[float] = field(default_factory=lambda: [0.0, 0.25, 0.5, 1.0])
    env_dialogues: int = 1
    decision_prompts: int = 16
    select: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if any(not 0.0 <= f <= 1.0 for f in self.fractions):
            raise ValueError(f"curve.fractions must lie in [0, 1], got {self.fractions}")
        if self.env_dialogues < 0 or self.decision_prompts < 0:
            raise ValueError("curve.env_dialogues and curve.decision_prompts must be >= 0")
        if unknown := set(self.select) - set(POINT_KEYS):
            raise ValueError(f"curve.select: {sorted(unknown)} are not curve metrics {POINT_KEYS}")


def held_out_items(n: int, domains: Sequence[str] | None = None) -> list[DecisionItem]:
    """About `n` proposal items and `n` question items, balanced per domain, from held-out seeds."""
    from mimesis_rl.envs.registry import DOMAINS

    if n <= 0:
        return []
    names = list(domains) if domains is not None else list(DOMAINS)
    proposing = [d for d in names if d in PROPOSALS]
    per_proposing = math.ceil(n / max(len(proposing), 1))
    per_question = math.ceil(n / max(len(names), 1))
    items = domain_items(names, 2 * max(per_proposing, per_question), seed=HELD_OUT_SEED,
                         episodes_per_domain=episodes_for(per_proposing))
    kept: dict[tuple[str, bool], int] = defaultdict(int)
    out = []
    for item in items:
        key = (item.domain, item.kind == "question")
        if kept[key] < (per_question if key[1] else per_proposing):
            kept[key] += 1
            out.append(item)
    return out


def decision_point(user: Any, items: Sequence[DecisionItem]) -> dict[str, float]:
    """Decision agreement and answer rate of `user` (one UserSide for every domain) on `items`."""
    from mimesis_rl.envs.actions import reply_accepts
    from mimesis_rl.simulator.rewards.answers import unanswered

    answered: list[bool] = []
    said_yes: dict[bool, list[bool]] = {True: [], False: []}  # by the card's decision
    if items:  # every domain's items in one lockstep replay: a few batched rounds, not one per domain
        for item, (state, reply) in zip(items, replay_many(items, user), strict=True):
            if item.kind == "question":
                forms = answer_forms(item.domain, state.goal.slots, item.asked_slots)
                answered.append(reply is not None
                                and not unanswered(reply.message, state.goal.slots, item.asked_slots, forms))
            else:
                said_yes[bool(item.expected_accept)].append(reply is not None and reply_accepts(reply))
    out = {}
    if proposals := len(said_yes[True]) + len(said_yes[False]):
        agreed = sum(said_yes[True]) + said_yes[False].count(False)
        out["decision_accuracy"] = agreed / proposals
    if said_yes[True] and said_yes[False]:
        out["decision_gap"] = (sum(said_yes[True]) / len(said_yes[True])
                               - sum(said_yes[False]) / len(said_yes[False]))
    if answered:
        out["answers_accuracy"] = sum(answered) / len(answered)
    return out


def env_dialogues(user: Any, dialogues: int, domains: Sequence[str] | None = None,
                  max_turns: int | None = None, seed_base: int = ENV_SEED_BASE) -> list[Any]:
    """The scripted agent against `user`: `dialogues` seeded dialogues per domain (seeds from `seed_base`,
    by default the curve's), every domain in one lockstep batch; the finished episode states, domain by
    domain."""
    from mimesis_rl.envs.loop import play
    from mimesis_rl.envs.multi import MultiDomainEnv, PerDomainAgent
    from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent

    names = list(domains) if domains is not None else list(DOMAINS)
    plan = [(d, seed_base + i) for d in names for i in range(dialogues)]
    if not plan:
        return []
    envs = {d: make_env(d, max_turns=max_turns) for d in names}
    env = MultiDomainEnv(envs, plan, name="all-domains", description="the built-in domains, one batch")
    return play(env, PerDomainAgent({d: scripted_agent(d) for d in names}, "scripted"), user,
                list(range(len(plan))))


def env_point(user: Any, dialogues: int, domains: Sequence[str] | None = None,
              max_turns: int | None = None, per_domain: bool = False) -> dict[str, float]:
    """The scripted agent's success rate against `user`, `dialogues` seeded dialogues per domain (and
    each domain's as `env_success.<domain>` with `per_domain`: the issue's rule is read per domain)."""
    from mimesis_rl.envs.registry import DOMAINS

    names = list(domains) if domains is not None else list(DOMAINS)
    states = env_dialogues(user, dialogues, names, max_turns)
    if not states:
        return {}
    wins = [bool(s.verdict and s.verdict.success) for s in states]
    out = {"env_success_rate": sum(wins) / len(wins)}
    if per_domain:
        for name in names:
            won = [w for state, w in zip(states, wins, strict=True) if state.domain == name]
            out[f"env_success.{name}"] = sum(won) / len(won)
    return out


class SimulatorCurve:
    """The `evaluate(model, step)` a `CurveCallback` runs during `sim_rl`: the model as it stands, in
    the runtime the environment uses, on the same items and seeds at every point."""

    def __init__(self, settings: CurveSettings, tokenizer: Any, manifest: Any, sampling: Any,
                 seed: int = 0, batch_size: int = 16, domains: Sequence[str] | None = None,
                 adapter: str | None = "default") -> None:
        self.settings, self.tokenizer, self.manifest = settings, tokenizer, manifest
        self.sampling, self.seed, self.batch_size, self.domains = sampling, seed, batch_size, domains
        self.adapter = adapter
        self.items = held_out_items(settings.decision_prompts, domains)

    def user(self, model: Any, step: int) -> Any:
        """The model as a user side (adapter `default` active: TRL trains the PEFT model itself, which
        is what the trainer hands its callbacks; None for a fully fine-tuned model)."""
        from mimesis_rl.models.inference.runner import ModelRunner
        from mimesis_rl.simulator.runtime import UserSimulator

        runner = ModelRunner(model, self.tokenizer, self.sampling, adapter=self.adapter, seed=self.seed,
                             reuse_cache=False)
        return UserSimulator.from_manifest(runner, self.manifest, name=f"curve@{step}",
                                           batch_size=self.batch_size)

    def __call__(self, model: Any, step: int) -> Mapping[str, float]:
        user = self.user(model, step)
        point = decision_point(user, self.items)
        if self.settings.env_dialogues:
            point.update(env_point(user, self.settings.env_dialogues, self.domains))
        return point


def curve_callback(settings: CurveSettings, max_steps: int, tokenizer: Any, manifest: Any,
                   checkpoint_dir: str | Path, seed: int = 0, batch_size: int = 16,
                   domains: Sequence[str] | None = None, adapter: str | None = "default") -> Any:
    """The learning-curve callback of a simulator stage (`sim_sft.curve`, `sim_rl.curve`), or None when
    it is off. Its points live in the checkpoint folder, so a resumed run keeps the ones it paid for."""
    if not settings.enabled:
        return None
    from mimesis_rl.training.curves import CurveCallback, curve_steps

    evaluate = SimulatorCurve(settings, tokenizer, manifest, manifest.sampling, seed, batch_size=batch_size,
                              domains=domains, adapter=adapter)
    steps = curve_steps(max_steps, settings.fractions)
    return CurveCallback(evaluate, steps, Path(checkpoint_dir) / "curve.jsonl", select=settings.select)
