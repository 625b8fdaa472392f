"""Several domains in one lockstep batch: one `Environment` and one `AgentSide` that route each
dialogue to its own domain.

Why: the rollout engine batches the dialogues of one environment; the fidelity environment part and
the generalisation matrix want every domain (and every panel member) in the same batch, which is
where batched generation pays. Episodes keep their own domain and seed, so a user's randomness
(keyed by domain, seed and turn) is the same as in a per-domain run: batching changes the cost, not
the dialogues.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from mimesis_rl.envs.protocols import AgentSide, Environment, EpisodeState, Observation, SessionSpec, UserSide


class MultiDomainEnv:
    """Dialogue i plays `plan[i] = (domain, seed)` or `(domain, seed, tag)`: `reset(i)` starts it in
    its domain's environment; a tag is appended to the episode id (`…@tag`), so two dialogues on the
    same (domain, seed), e.g. against two panel members, never share an agent token track."""

    def __init__(self, envs: Mapping[str, Environment], plan: Sequence[tuple[Any, ...]],
                 name: str = "multi-domain", description: str = "several domains in one batch") -> None:
        self.envs = dict(envs)
        self.plan = [tuple(p) for p in plan]
        unknown = sorted({p[0] for p in self.plan} - set(self.envs))
        if unknown:
            raise ValueError(f"plan names domains without an environment: {unknown}")
        self.name, self.description = name, description
        self.max_turns = max(env.max_turns for env in self.envs.values())

    def reset(self, index: int) -> EpisodeState:
        domain, seed, *tag = self.plan[index]
        state = self.envs[domain].reset(seed)
        if tag:
            state.episode_id = f"{state.episode_id}@{tag[0]}"
        return state

    def observe(self, state: EpisodeState) -> Observation:
        return self.envs[state.domain].observe(state)

    def step(self, state: EpisodeState, agent_message: str) -> Any:
        return self.envs[state.domain].step(state, agent_message)

    def user_turn(self, state: EpisodeState, reply: Any) -> None:
        self.envs[state.domain].user_turn(state, reply)

    def verify(self, state: EpisodeState) -> Any:
        return self.envs[state.domain].verify(state)


class PerDomainAgent:
    """An `AgentSide` that hands each observation to its domain's agent, one batched call per domain."""

    def __init__(self, agents: Mapping[str, AgentSide], name: str) -> None:
        self.agents = dict(agents)
        self.name = name

    def act(self, observations: list[Observation]) -> list[str]:
        out: list[str] = [""] * len(observations)
        groups: dict[str, list[int]] = defaultdict(list)
        for i, obs in enumerate(observations):
            groups[obs.domain].append(i)
        for domain, idx in groups.items():
            for i, message in zip(idx, self.agents[domain].act([observations[i] for i in idx]), strict=True):
                out[i] = message or ""
        return out


class PerDomainUser:
    """A `UserSide` that plays each session with its domain's user (scripted users are per domain), so a
    per-domain baseline plays the same multi-domain batch as one learned simulator does."""

    def __init__(self, users: Mapping[str, UserSide], name: str) -> None:
        self.users = dict(users)
        self.name = name

    def start(self, specs: list[SessionSpec]) -> list[tuple[str, Any]]:
        return [(spec.domain, self.users[spec.domain].start([spec])[0]) for spec in specs]

    def opening(self, sessions: list[tuple[str, Any]]) -> list[Any]:
        return [self.users[domain].opening([session])[0] for domain, session in sessions]

    def respond(self, sessions: list[tuple[str, Any]], agent_messages: list[str]) -> list[Any]:
        return [self.users[domain].respond([session], [message])[0]
                for (domain, session), message in zip(sessions, agent_messages, strict=True)]
