"""The rollout engine: N dialogues in lockstep, batched model parties, records for training and reading.

The dialogue logic is `mimesis_rl.envs.loop.play` (the same loop scripted runs use); the engine
adds what model rollouts need around it:

- every dialogue gets a unique episode id (`<env>-<seed>#<k>` for the k-th repeat of a seed, as in
  GRPO groups), so per-dialogue token tracks and sampling seeds never collide;
- a user side per dialogue (`MixedUsers`), so scripted users and simulators share a batch;
- a progress bar, per-turn token notes in the trace, and warnings for what went wrong in a
  dialogue (empty messages, turns cut at max_new_tokens, an agent that never acts);
- `RolloutResult.to_trl()`: the dict TRL's GRPOTrainer expects back from a `rollout_func`.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from mimesis_rl.data.jsonl import write_jsonl
from mimesis_rl.envs.loop import play, summarize
from mimesis_rl.envs.protocols import AgentSide, Environment, EpisodeState, UserSide
from mimesis_rl.models.inference.track import ChatTrack
from mimesis_rl.rollout.agent import ModelAgent
from mimesis_rl.rollout.mixed import MixedUsers

log = logging.getLogger(__name__)


class _UniqueEpisodes:
    """Environment wrapper that appends `#k` to the k-th episode with the same id (in reset order).

    Counting ids rather than seeds keeps a multi-domain batch (`MultiDomainEnv`, reset by position)
    unique too: GRPO's repeated (domain, seed) prompts get the ids a per-domain run gives them.
    """

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._seen: Counter[str] = Counter()
        self.name, self.description, self.max_turns = env.name, env.description, env.max_turns

    def reset(self, seed: int) -> EpisodeState:
        state = self._env.reset(seed)
        base = state.episode_id
        state.episode_id = f"{base}#{self._seen[base]}"
        self._seen[base] += 1
        return state

    def observe(self, state: EpisodeState) -> Any:
        return self._env.observe(state)

    def step(self, state: EpisodeState, agent_message: str) -> Any:
        return self._env.step(state, agent_message)

    def user_turn(self, state: EpisodeState, reply: Any) -> None:
        self._env.user_turn(state, reply)

    def verify(self, state: EpisodeState) -> Any:
        return self._env.verify(state)


def _warnings(state: EpisodeState, track: ChatTrack | None, max_new_tokens: int | None,
              expect_action: bool = True) -> list[str]:
    """What a reader of the transcript should know went wrong, one line each."""
    out: list[str] = []
    agent_turn = user_turn = 0
    for turn in state.trace:
        if turn.role == "assistant":
            agent_turn += 1
            if not turn.content.strip():
                out.append(f"agent turn {agent_turn}: empty message")
            if turn.meta.get("stopped") is False:
                out.append(
                    f"agent turn {agent_turn}: cut at max_new_tokens={max_new_tokens} without an end token"
                )
        elif turn.role == "user":
            user_turn += 1
            if turn.meta.get("empty"):
                out.append(f"user turn {user_turn}: empty message")
            if turn.meta.get("error"):
                out.append(f"user turn {user_turn}: {turn.meta['error']}")
    acted = state.actions or state.invalid_actions or state.final_action is not None
    if expect_action and state.agent_turns and not acted:
        out.append(f"the agent never emitted an action in {state.agent_turns} turn(s)")
    if track is not None:
        out += track.notes
    return out


def _annotate(state: EpisodeState, track: ChatTrack) -> None:
    """Per-turn token notes on the agent's trace turns (count, stop, mean log-prob)."""
    agent_turns = [t for t in state.trace if t.role == "assistant"]
    if len(agent_turns) != len(track.turns):
        return  # a skipped (context-full) turn has no tokens; the warning says so
    for turn, tokens in zip(agent_turns, track.turns, strict=True):
        turn.meta.update(
            {
                "tokens": tokens.n_tokens,
                "stopped": tokens.stopped,
                "mean_logprob": None if tokens.mean_logprob is None else round(tokens.mean_logprob, 6),
            }
        )


@dataclass
class RolloutResult:
    """Finished episodes, aligned with the agent's token tracks (None for a scripted agent)."""

    env: str
    agent: str
    users: list[str]
    states: list[EpisodeState]
    tracks: list[ChatTrack | None]
    warnings: list[list[str]]
    end_of_turn_id: int | None
    seconds: float

    @property
    def agent_turns(self) -> int:
        return sum(s.agent_turns for s in self.states)

    @property
    def user_turns(self) -> int:
        return sum(1 for s in self.states for t in s.trace if t.role == "user")

    def records(self) -> list[dict[str, Any]]:
        """One transcript record per dialogue (the user's reasoning included, for coaching and analysis)."""
        out = []
        for state, user, track, warnings in zip(
            self.states, self.users, self.tracks, self.warnings, strict=True
        ):
            extra: dict[str, Any] = {"env": self.env, "agent": self.agent, "user": user, "warnings": warnings}
            if track is not None:
                extra["agent_tokens"] = sum(track.mask)
            out.append(state.to_record(**extra))
        return out

    def write(self, path: str | Path) -> int:
        return write_jsonl(path, self.records())

    def summary(self) -> dict[str, Any]:
        stats = summarize(self.states)
        turns = self.agent_turns + self.user_turns
        stats.update(
            {
                "env": self.env,
                "agent": self.agent,
                "users": dict(Counter(self.users)),
                "agent_turns": self.agent_turns,
                "user_turns": self.user_turns,
                "seconds": round(self.seconds, 3),
                "turns_per_second": round(turns / self.seconds, 3) if self.seconds > 0 else None,
                "dialogues_with_warnings": sum(1 for w in self.warnings if w),
            }
        )
        return stats

    def to_trl(self) -> dict[str, Any]:
        """What a GRPOTrainer `rollout_func` returns: one sample per dialogue, in seed order.

        `prompt_ids`, `completion_ids`, `logprobs` are required by TRL; `env_mask` (1 = agent token)
        becomes its tool mask, so only the agent's own tokens carry loss; `reward`, `success`,
        `episode_id`, `end_reason` reach the reward functions as keyword lists.
        """
        if any(t is None for t in self.tracks) or self.end_of_turn_id is None:
            raise ValueError("to_trl needs a model agent (ModelAgent): a scripted agent has no token record")
        fields = [t.trl_fields(self.end_of_turn_id) for t in self.tracks if t is not None]
        out: dict[str, Any] = {
            key: [f[key] for f in fields] for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask")
        }
        out["reward"] = [s.verdict.reward if s.verdict else 0.0 for s in self.states]
        out["success"] = [bool(s.verdict and s.verdict.success) for s in self.states]
        out["episode_id"] = [s.episode_id for s in self.states]
        out["end_reason"] = [s.end_reason for s in self.states]
        return out


def run_rollouts(
    env: Environment,
    agent: AgentSide,
    users: UserSide | Sequence[UserSide],
    seeds: Sequence[int],
    *,
    progress: bool = True,
    desc: str | None = None,
    expect_action: bool = True,
) -> RolloutResult:
    """Play one dialogue per seed in lockstep; `users` is one side for all or one per dialogue.

    expect_action: warn about an agent that never acts (False for an environment with no actions).
    """
    seeds = list(seeds)
    sides = list(users) if isinstance(users, Sequence) else [users] * len(seeds)
    if len(sides) != len(seeds):
        raise ValueError(f"{len(sides)} user sides for {len(seeds)} dialogues")
    user: UserSide = sides[0] if sides and all(s is sides[0] for s in sides) else MixedUsers(sides)
    wrapped = _UniqueEpisodes(env)
    bar = tqdm(
        total=len(seeds),
        desc=desc or f"{env.name} rollouts",
        unit="dialogue",
        disable=not progress,
        leave=False,
    )
    done = 0

    def on_round(round_no: int, states: list[EpisodeState]) -> None:
        nonlocal done
        if isinstance(agent, ModelAgent):
            agent.release([s.episode_id for s in states if s.done])
        finished = sum(s.done for s in states)
        bar.update(finished - done)
        done = finished
        bar.set_postfix(round=round_no, open=len(states) - finished)

    start = time.perf_counter()
    try:
        states = play(wrapped, agent, user, seeds, on_round=on_round)  # type: ignore[arg-type]
    finally:
        bar.close()
    seconds = time.perf_counter() - start

    model_agent = agent if isinstance(agent, ModelAgent) else None
    tracks: list[ChatTrack | None] = []
    for state in states:
        track = model_agent.tracks.pop(state.episode_id, None) if model_agent else None
        if track is not None:
            track.kv = None
        if model_agent is not None and track is None:
            # The episode ended before the agent spoke (the user left at once): an empty record.
            track = ChatTrack(prompt_ids=model_agent.runner.chat.prompt_ids(env.observe(state).messages))
        if track is not None:
            _annotate(state, track)
        tracks.append(track)
    max_new = model_agent.runner.sampling.max_new_tokens if model_agent else None
    warnings = [_warnings(s, t, max_new, expect_action) for s, t in zip(states, tracks, strict=True)]
    flagged = sum(1 for w in warnings if w)
    if flagged:
        kinds = Counter(re.sub(r"\d+", "N", w) for ws in warnings for w in ws)
        log.warning(
            "%d of %d dialogues have warnings (see `warnings` in the transcripts): %s",
            flagged,
            len(states),
            "; ".join(f"{n}x {kind}" for kind, n in kinds.most_common(5)),
        )
    return RolloutResult(
        env=env.name,
        agent=agent.name,
        users=[s.name for s in sides],
        states=states,
        tracks=tracks,
        warnings=warnings,
        end_of_turn_id=model_agent.runner.chat.end_of_turn_id if model_agent else None,
        seconds=seconds,
    )
