"""Behaviour-cloning data for `agent_sft`: the scripted agents' winning transcripts, as chat messages.

Why winning transcripts only: an untrained 135M agent never reaches a deal, so RL from it sees zero
reward; cloning what a competent (scripted) policy says in the dialogues it won teaches the action
grammar and a workable dialogue shape. Each example is exactly the agent's view (`Environment.observe`:
system prompt, user messages, environment feedback, the agent's own messages), so SFT trains on the
same token layout the rollout engine later produces; the loss falls on assistant turns only.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.envs.actions import ACTION_RE
from mimesis_rl.envs.loop import play
from mimesis_rl.envs.protocols import Observation
from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent
from mimesis_rl.envs.specs import make_user

log = logging.getLogger(__name__)


class _Recorder:
    """Wraps an agent side and keeps, per episode, its last observation and its last message."""

    def __init__(self, agent: Any) -> None:
        self.agent, self.name = agent, agent.name
        self.last: dict[str, tuple[list[dict[str, str]], str]] = {}

    def act(self, observations: list[Observation]) -> list[str]:
        messages = self.agent.act(observations)
        for obs, message in zip(observations, messages, strict=True):
            self.last[obs.episode_id] = ([dict(m) for m in obs.messages], message)
        return messages


@dataclass
class CloneReport:
    """How many transcripts were played and kept, per domain and user."""

    played: Counter = field(default_factory=Counter)
    kept: Counter = field(default_factory=Counter)

    def as_metrics(self) -> dict[str, Any]:
        return {
            "played": dict(self.played),
            "kept": dict(self.kept),
            "kept_total": sum(self.kept.values()),
            "played_total": sum(self.played.values()),
        }


def action_span(message: str) -> str | None:
    """The action tag of an agent message (`<action>{...}</action>`), with the space before it when the
    message has text first, so it tokenizes alone as it does in place; None without one.

    Why: a campsite proposal's three counts are a few tokens of a ~100-token transcript, and which
    split the agent proposes is what decides success (`training.span_weights`, `agent_sft.action_weight`).
    """
    matches = list(ACTION_RE.finditer(message))
    if not matches:
        return None
    found = matches[-1]
    start = found.start()
    return message[start - 1 : found.end()] if start and message[start - 1] == " " else found.group(0)


def clone_examples(
    domains: Sequence[str] | None,
    users: Sequence[str],
    per_domain: int | Mapping[str, int],
    seed: int = 0,
    max_turns: int | None = None,
) -> tuple[list[dict[str, Any]], CloneReport]:
    """Up to `per_domain` winning transcripts per domain (spread over `users`), as `{"messages": [...]}`;
    `per_domain` may name a count per domain (a domain it leaves out gets none).

    users: user specs (`scripted:cooperative`, `scripted:train_mix`, `learned:…`, `prompted:…`); model
    users need the rollout resolvers registered (`cli.envs.load_resolvers()`). Seeds are
    `seed*100000 + i` so BC data never shares episodes with the RL prompts (seed offset 10**6+).
    """
    domains = list(domains or DOMAINS)
    if not users:
        raise ValueError("agent_sft: no training users to clone against (agent_sft.users is empty)")
    if isinstance(per_domain, Mapping):
        counts = {d: int(per_domain.get(d, 0)) for d in domains}
    else:
        counts = dict.fromkeys(domains, per_domain)
    if any(n < 0 for n in counts.values()) or not any(counts.values()):
        raise ValueError(f"agent_sft.per_domain must be >= 1 (or a count per domain), got {per_domain}")
    report = CloneReport()
    examples: list[dict[str, Any]] = []
    for name in domains:
        n = counts[name]
        quota = [n // len(users) + (1 if i < n % len(users) else 0) for i in range(len(users))]
        for spec, want in zip(users, quota, strict=True):
            if want == 0:
                continue
            env = make_env(name, max_turns=max_turns)
            kept = 0
            start = seed * 100_000
            for attempt in range(4):  # a hard user may lose some dialogues: play more until the quota is met
                seeds = list(range(start, start + want * (attempt + 1) * 2))
                start += len(seeds)
                recorder = _Recorder(scripted_agent(name))
                states = play(env, recorder, make_user(spec, name), seeds)
                report.played[f"{name}.{spec}"] += len(states)
                for state in states:
                    if kept >= want or not (state.verdict and state.verdict.success):
                        continue
                    if state.episode_id not in recorder.last:
                        continue
                    messages, last = recorder.last[state.episode_id]
                    examples.append(
                        {
                            "messages": [*messages, {"role": "assistant", "content": last}],
                            "domain": name,
                            "user": spec,
                            "episode_id": state.episode_id,
                        }
                    )
                    kept += 1
                if kept >= want:
                    break
            report.kept[f"{name}.{spec}"] += kept
            if kept < want:
                log.warning(
                    "agent_sft: %s vs %s: only %d winning transcripts of %d wanted", name, spec, kept, want
                )
    if not examples:
        raise ValueError(f"agent_sft: the scripted agents won no dialogue in {domains} against {list(users)}")
    return examples, report
