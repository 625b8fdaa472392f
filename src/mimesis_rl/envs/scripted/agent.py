"""Scripted agents: competent rule-based policies, plus a few broken ones for tests and baselines.

A policy is a pure function of the observation (it re-reads the dialogue every turn), so a
batch of dialogues needs no per-dialogue memory and any transcript can be replayed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mimesis_rl.envs.protocols import Observation
from mimesis_rl.envs.task_env import ENV_PREFIX

Policy = Callable[[Observation], str]


class ScriptedAgent:
    """An `AgentSide` that applies one policy to each observation in the batch."""

    def __init__(self, policy: Policy, name: str) -> None:
        self.policy = policy
        self.name = name

    def act(self, observations: list[Observation]) -> list[str]:
        return [self.policy(obs) for obs in observations]


# -- reading the observation --------------------------------------------------------------------


def without_feedback(content: str) -> str:
    """A user-role message without the environment's feedback lines ("" when it was only feedback)."""
    return "\n".join(ln for ln in content.split("\n") if not ln.startswith(ENV_PREFIX))


def user_texts(obs: Observation) -> list[str]:
    """The user's messages so far, without environment feedback."""
    texts = (without_feedback(m["content"]) for m in obs.messages[1:] if m["role"] == "user")
    return [t for t in texts if t]


def agent_texts(obs: Observation) -> list[str]:
    return [m["content"] for m in obs.messages[1:] if m["role"] == "assistant"]


def all_user_text(obs: Observation) -> str:
    return "\n".join(user_texts(obs))


def last_user(obs: Observation) -> str:
    texts = user_texts(obs)
    return texts[-1] if texts else ""


def times_asked(obs: Observation, marker: str) -> int:
    """How often the agent already sent a message containing `marker` (its own question tag)."""
    return sum(marker.lower() in t.lower() for t in agent_texts(obs))


def find(pattern: str, text: str, flags: int = re.IGNORECASE) -> re.Match[str] | None:
    return re.search(pattern, text, flags)


def last_match(pattern: str, text: str, flags: int = re.IGNORECASE) -> re.Match[str] | None:
    """The last match in `text`: later statements override earlier ones (users change their mind)."""
    found = list(re.finditer(pattern, text, flags))
    return found[-1] if found else None


def latest_of(patterns: dict[str, str], text: str) -> str | None:
    """The key whose pattern occurs last in `text` (the user's latest word on the matter)."""
    best, best_pos = None, -1
    for key, pattern in patterns.items():
        m = last_match(pattern, text)
        if m and m.start() > best_pos:
            best, best_pos = key, m.start()
    return best


# -- broken agents (for tests, the CLI and the panel table) ------------------------------------


def never_act(obs: Observation) -> str:
    """Talks politely and never takes an action (runs into the turn limit)."""
    return "Could you tell me a bit more about what you need?"


def invalid_actions(obs: Observation) -> str:
    """Emits a malformed action every turn."""
    return 'Let me do that. <action>{"type": "???", oops</action>'


def silent(obs: Observation) -> str:
    """Sends empty messages."""
    return ""


GENERIC_AGENTS: dict[str, Policy] = {
    "never_act": never_act,
    "invalid": invalid_actions,
    "silent": silent,
}
