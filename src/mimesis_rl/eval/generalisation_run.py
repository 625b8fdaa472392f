"""Playing the generalisation matrix: every agent variant x every unseen panel member x every environment.

Why paired: every agent meets the same dialogues — the same (environment, seed) goal cards, and the
same user randomness (scripted users seed their generator from (name, domain, seed); LM users key
sampling by (domain, episode seed, turn)) — so a difference between two agents is measured on
matched pairs and its bootstrap interval resamples pairs, not two independent samples.

One agent plays all its dialogues in one lockstep rollout (`rollout.run_rollouts`): the environments
are routed by `MultiEnv`, the users by `MixedUsers`, so each round is one batched generate for the
agent and one per LM user, whatever the number of cells. The rows it returns are measured by
`generalisation_metrics`; `generalisation_report` writes them up.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.envs.multi import MultiDomainEnv, PerDomainAgent
from mimesis_rl.envs.protocols import AgentSide, UserSide
from mimesis_rl.envs.task_env import TaskEnv
from mimesis_rl.eval.generalisation_metrics import dialogue_row
from mimesis_rl.eval.generalisation_settings import AgentVariant, GeneralisationSettings

log = logging.getLogger(__name__)

# -- playing the matrix --------------------------------------------------------------------------


@dataclass
class Played:
    """The raw rows of one agent, its transcripts and what it cost."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    agent_turns: int = 0
    user_turns: int = 0

    def as_agent(self, name: str) -> Played:
        """These dialogues under another agent's name, for an agent whose folder plays alike
        (`agent_twin`): greedy decoding of the same weights on the same seeds gives the same turns."""
        return Played([{**r, "agent": name} for r in self.rows], [{**r, "agent": name} for r in self.records])


def play_agent(agent: AgentSide, agent_name: str, users: Mapping[str, Mapping[str, UserSide]],
               envs: Mapping[str, TaskEnv], seeds: Sequence[int], progress: bool = True,
               batch_dialogues: int | None = None) -> Played:
    """All dialogues of one agent (every member x env x seed) in lockstep rollouts of at most
    `batch_dialogues` dialogues each (None = one rollout), environment by environment so a batch
    holds prompts of similar length. Rows come back in (member, env, seed) order."""
    from mimesis_rl.rollout import run_rollouts

    jobs = [(m, e, s) for e in envs for m in users for s in seeds]
    size = batch_dialogues or len(jobs)
    played = Played()
    out: dict[tuple[str, str, int], tuple[dict[str, Any], dict[str, Any]]] = {}
    for lo in range(0, len(jobs), size):
        chunk = jobs[lo:lo + size]
        multi = MultiDomainEnv(envs, [(env, seed, member) for member, env, seed in chunk], name="panel",
                               description="every environment of the generalisation matrix")
        sides = [users[m][e] for m, e, _ in chunk]
        start = time.perf_counter()
        result = run_rollouts(multi, agent, sides, list(range(len(chunk))),  # type: ignore[arg-type]
                              progress=progress,
                              desc=f"agent_eval {agent_name} {lo + len(chunk)}/{len(jobs)}")
        played.seconds += time.perf_counter() - start
        played.agent_turns += result.agent_turns
        played.user_turns += result.user_turns
        for job, state, record in zip(chunk, result.states, result.records(), strict=True):
            record.update({"agent": agent_name, "member": job[0]})
            out[job] = (dialogue_row(state, agent_name, job[0]), record)
    for job in [(m, e, s) for m in users for e in envs for s in seeds]:
        played.rows.append(out[job][0])
        played.records.append(out[job][1])
    return played


# -- building the parties ------------------------------------------------------------------------


def agent_folder(spec: str, root: Path = Path(".")) -> Path | None:
    """The local folder a model agent spec names (`model:PATH` or a bare PATH, under `root`); None for
    scripted agents and registry URIs, which have none here."""
    if spec == "scripted" or spec.startswith("scripted:"):
        return None
    body = spec.removeprefix("model:")
    return None if body.startswith(("models:/", "runs:/")) else root / body


def agent_problem(spec: str, root: Path = Path(".")) -> str | None:
    """Why an agent spec cannot be played here (None = it can): a missing folder, mostly."""
    folder = agent_folder(spec, root)
    if folder is None:
        return None
    body = spec.removeprefix("model:")
    if not folder.is_dir():
        return f"{body} does not exist (has its stage run?)"
    if not any((folder / m).exists() for m in ("mimesis.json", "adapter_config.json", "config.json")):
        return f"{body} is not a model folder (no mimesis.json, adapter_config.json or config.json)"
    return None


def agent_twin(spec: str, played: Mapping[str, str], root: Path = Path(".")) -> tuple[str | None, str | None]:
    """(fingerprint of the agent's folder, the played agent with the same one): an RL stage that kept
    its warm start (`curve.select`) saves the warm start's very weights. Scripted agents and registry
    specs have no fingerprint here (None, None)."""
    from mimesis_rl.models.artifact import behaviour_fingerprint

    folder = agent_folder(spec, root)
    if folder is None or not folder.is_dir():
        return None, None
    key = behaviour_fingerprint(folder)
    return key, played.get(key)


def trained_against(spec: str, root: Path = Path(".")) -> list[str]:
    """Every string an agent folder's manifest records (where it says what it trained against)."""
    import json

    folder = agent_folder(spec, root)
    manifest = folder / "mimesis.json" if folder is not None else None
    if manifest is None or not manifest.exists():
        return []
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)

    walk(json.loads(manifest.read_text()).get("extra", {}))
    return out


def build_agent(variant: AgentVariant, envs: Sequence[str], pool: Any, settings: GeneralisationSettings,
                base: Path) -> AgentSide:
    """A scripted agent (per domain) or a `ModelAgent` on the shared pool, greedy."""
    from mimesis_rl.envs.specs import make_agent, split_agent_spec

    kind, body = split_agent_spec(variant.spec)
    if kind == "scripted":
        return PerDomainAgent({e: make_agent(variant.spec, e) for e in envs}, variant.name)
    from mimesis_rl.agent.artifact import turn_budget_problem
    from mimesis_rl.models.decoding import SamplingParams
    from mimesis_rl.models.inference.sources import resolve_source
    from mimesis_rl.rollout import ModelAgent

    sampling = SamplingParams(max_new_tokens=settings.agent_max_new_tokens, do_sample=False)
    source = resolve_source(body, base)
    budget = turn_budget_problem(source.folder, settings.agent_max_new_tokens) if source.folder else None
    if budget:  # its cut actions are invalid: its scores would measure the budget, not the agent
        log.warning("agent_eval: %s", budget)
    runner = pool.runner(source, sampling, seed=settings.sampling_seed)
    return ModelAgent(runner, name=variant.name)


def build_users(members: Sequence[tuple[str, str]], envs: Sequence[str], pool: Any,
                settings: GeneralisationSettings, base: Path) -> dict[str, dict[str, UserSide]]:
    """member -> env -> user side. One `UserSimulator` per LM member serves every environment; a prompted
    member samples with the project's user sampling, a learned one with its own, both capped at
    `user_max_new_tokens`."""
    from mimesis_rl.models.artifact import DEFAULT_SAMPLING
    from mimesis_rl.simulator.build import PoolBackend, UserDecoding, build_user

    sampling = dataclasses.replace(DEFAULT_SAMPLING, max_new_tokens=settings.user_max_new_tokens)
    decoding = UserDecoding(sampling, max_new_tokens=settings.user_max_new_tokens,
                            seed=settings.sampling_seed, max_context_tokens=settings.user_max_context_tokens)
    backend = PoolBackend(pool, base)
    out: dict[str, dict[str, UserSide]] = {}
    for name, spec in members:
        if spec.startswith("scripted:"):
            out[name] = {e: build_user(spec, backend, decoding, domain=e) for e in envs}
        else:
            out[name] = dict.fromkeys(envs, build_user(spec, backend, decoding, name=name))
    return out
