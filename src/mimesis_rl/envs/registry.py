"""The built-in domains by name, and constructors for their environments and scripted parties."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from mimesis_rl.envs.domains import bargain, campsite, content, returns, shopping, support, travel, tutoring
from mimesis_rl.envs.scripted.agent import GENERIC_AGENTS, Policy, ScriptedAgent
from mimesis_rl.envs.scripted.knobs import Knobs, preset
from mimesis_rl.envs.scripted.user import ScriptedUser, UserPolicy
from mimesis_rl.envs.task_env import TaskEnv


@dataclass(frozen=True)
class Domain:
    """One task domain: its environment class, scripted user agenda and competent scripted agent."""

    name: str
    env_cls: type[TaskEnv]
    user_policy: type[UserPolicy]
    agent_policy: Policy

    @property
    def description(self) -> str:
        return self.env_cls.description


def _domain(module: ModuleType, env: str, user: str) -> Domain:
    env_cls = getattr(module, env)
    return Domain(env_cls.name, env_cls, getattr(module, user), module.agent_policy)


DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (
        _domain(shopping, "ShoppingEnv", "ShoppingUser"),
        _domain(bargain, "BargainEnv", "BargainUser"),
        _domain(campsite, "CampsiteEnv", "CampsiteUser"),
        _domain(travel, "TravelEnv", "TravelUser"),
        _domain(support, "SupportEnv", "SupportUser"),
        _domain(returns, "ReturnsEnv", "ReturnsUser"),
        _domain(content, "ContentEnv", "ContentUser"),
        _domain(tutoring, "TutoringEnv", "TutoringUser"),
    )
}


def domain(name: str) -> Domain:
    try:
        return DOMAINS[name]
    except KeyError:
        raise KeyError(f"unknown environment {name!r}; known: {', '.join(DOMAINS)}") from None


def make_env(name: str, max_turns: int | None = None, invalid_penalty: float | None = None) -> TaskEnv:
    """A fresh environment of a built-in domain."""
    return domain(name).env_cls(max_turns=max_turns, invalid_penalty=invalid_penalty)


def scripted_user(
    domain_name: str, preset_name: str = "cooperative", knobs: Knobs | None = None, name: str | None = None
) -> ScriptedUser:
    """A scripted user of `domain_name` with a named preset (or explicit knobs)."""
    policy = domain(domain_name).user_policy()
    return ScriptedUser(policy, knobs or preset(preset_name), name or f"scripted:{preset_name}")


AGENT_NAMES: tuple[str, ...] = ("scripted", *GENERIC_AGENTS)


def scripted_agent(domain_name: str, policy: str = "scripted") -> ScriptedAgent:
    """The domain's competent policy (`scripted`) or a generic broken one (never_act, invalid, silent)."""
    if policy == "scripted":
        return ScriptedAgent(domain(domain_name).agent_policy, f"scripted:{domain_name}")
    if policy in GENERIC_AGENTS:
        return ScriptedAgent(GENERIC_AGENTS[policy], f"scripted:{policy}")
    raise KeyError(f"unknown scripted agent {policy!r}; known: {', '.join(AGENT_NAMES)}")
