"""`TaskEnv`: the shared machinery of every built-in domain (turns, parsing, penalties, trace).

A domain subclasses it and supplies only what differs: `sample` (seeded scenario), `intro`
(the agent's task in words), `actions` (its grammar), `check_action` (domain-level validity,
e.g. unknown item ids) and `score` (the verifier before penalties).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.data.schema import PATTERN_NAMES, GoalCard
from mimesis_rl.envs.actions import parse_message, reply_accepts
from mimesis_rl.envs.protocols import (
    Action,
    ActionSpec,
    EndReason,
    EpisodeState,
    Observation,
    ParsedMessage,
    StepResult,
    TraceTurn,
    UserReply,
    Verdict,
)

log = logging.getLogger(__name__)

ENV_PREFIX = "[environment] "
EMPTY_USER = "(the user sent an empty message)"


@dataclass
class Scenario:
    """What a seeded goal generator produces for one episode."""

    goal: GoalCard
    public: dict[str, Any] = field(default_factory=dict)
    hidden: dict[str, Any] = field(default_factory=dict)
    persona: dict[str, Any] = field(default_factory=dict)


class TaskEnv:
    """Base class of the built-in domains; implements the `Environment` protocol."""

    name: str = "task"
    description: str = ""
    max_turns: int = 10
    invalid_penalty: float = 0.1
    actions: tuple[ActionSpec, ...] = ()

    @classmethod
    def card_facts(cls, slots: dict[str, Any]) -> dict[str, Any]:
        """The goal's slots as a user's card states them (`simulator.cards`): as they are, unless a
        domain's slots are the environment's bookkeeping rather than what its user sees."""
        return dict(slots)

    def __init__(self, max_turns: int | None = None, invalid_penalty: float | None = None) -> None:
        if max_turns is not None:
            if max_turns < 1:
                raise ValueError(f"max_turns must be >= 1, got {max_turns}")
            self.max_turns = max_turns
        if invalid_penalty is not None:
            if not 0.0 <= invalid_penalty <= 1.0:
                raise ValueError(f"invalid_penalty must be in [0, 1], got {invalid_penalty}")
            self.invalid_penalty = invalid_penalty

    # -- what a domain supplies -------------------------------------------------------------

    def sample(self, rng: random.Random) -> Scenario:
        raise NotImplementedError

    def intro(self, scenario: Scenario) -> str:
        """The agent's task and the public facts, in words (without the action grammar)."""
        raise NotImplementedError

    def check_action(self, state: EpisodeState, action: Action) -> str | None:
        """Domain-level validity of a well-formed action; a string explains what is wrong."""
        return None

    def score(self, state: EpisodeState) -> Verdict:
        """Task score of a finished episode, before the invalid-action penalty."""
        raise NotImplementedError

    # -- the protocol -----------------------------------------------------------------------

    def rng(self, seed: int) -> random.Random:
        """The episode's random generator: same (domain, seed), same episode, on any machine."""
        return random.Random(f"{self.name}:{seed}")

    def reset(self, seed: int) -> EpisodeState:
        scenario = self.sample(self.rng(seed))
        return EpisodeState(
            episode_id=f"{self.name}-{seed}",
            domain=self.name,
            seed=seed,
            goal=scenario.goal,
            system_prompt=self.system_prompt(scenario),
            max_turns=self.max_turns,
            persona=scenario.persona,
            public=scenario.public,
            hidden=scenario.hidden,
        )

    def system_prompt(self, scenario: Scenario) -> str:
        lines = [
            self.intro(scenario).strip(),
            "",
            "Actions (at most one per message, written exactly like this):",
        ]
        for spec in self.actions:
            effect = "ends the conversation" if spec.kind == "final" else "the user may accept or decline it"
            lines.append(f"- {spec.usage()} — {spec.doc} ({effect})")
        lines += [
            "Anything outside the action tag is sent to the user as your message.",
            f"You have at most {self.max_turns} messages. "
            "An invalid action costs a message and part of the reward.",
        ]
        return "\n".join(lines)

    def parse(self, state: EpisodeState, message: str | None) -> ParsedMessage:
        parsed = parse_message(message, self.actions)
        if parsed.action is not None:
            problem = self.check_action(state, parsed.action)
            if problem:
                return ParsedMessage(text=parsed.text, error=f"{parsed.action.type}: {problem}")
        return parsed

    def observe(self, state: EpisodeState) -> Observation:
        messages: list[dict[str, str]] = [{"role": "system", "content": state.system_prompt}]
        for turn in state.trace:
            if turn.role == "assistant":
                role, content = "assistant", turn.content
            elif turn.role == "user":
                role, content = "user", turn.content if turn.content.strip() else EMPTY_USER
            else:
                role, content = "user", ENV_PREFIX + turn.content
            if messages[-1]["role"] == role and role == "user":
                messages[-1] = {"role": role, "content": messages[-1]["content"] + "\n" + content}
            else:
                messages.append({"role": role, "content": content})
        return Observation(
            episode_id=state.episode_id,
            domain=state.domain,
            messages=messages,
            public=state.public,
            turn=state.agent_turns + 1,
            turns_left=state.turns_left,
        )

    def step(self, state: EpisodeState, agent_message: str | None) -> StepResult:
        message = "" if agent_message is None else str(agent_message)
        if state.done or state.awaiting != "agent":
            parsed = ParsedMessage(text=message, error=f"not the agent's turn (awaiting {state.awaiting})")
            self._note(state, f"ignored agent message: {parsed.error}")
            return StepResult(parsed=parsed, to_user=None, feedback=parsed.error, done=state.done)
        state.agent_turns += 1
        parsed = self.parse(state, message)
        meta: dict[str, Any] = {"turn": state.agent_turns}
        if parsed.action is not None:
            meta["action"] = parsed.action.to_dict()
        if parsed.error:
            meta["error"] = parsed.error
        state.trace.append(TraceTurn(role="assistant", content=message, meta=meta))
        if parsed.invalid:
            log.info(
                "%s turn %d: invalid agent message: %s", state.episode_id, state.agent_turns, parsed.error
            )
            state.invalid_actions += 1
            state.penalty += self.invalid_penalty
            feedback = (
                f"Invalid: {parsed.error}. This cost a message and a penalty of "
                f"{self.invalid_penalty:g}; {state.turns_left} message(s) left."
            )
            self._note(state, feedback, kind="invalid_action")
            if state.turns_left == 0:
                self._finish(state, "turn_limit")
            else:
                state.awaiting = "agent"
            return StepResult(parsed=parsed, to_user=None, feedback=feedback, done=state.done)
        action = parsed.action
        if action is not None:
            state.actions.append({"turn": state.agent_turns, **action.to_dict()})
            if action.kind == "final":
                state.final_action = action
                self._finish(state, "final_action")
                return StepResult(parsed=parsed, to_user=None, feedback=None, done=True)
            state.pending = action
        state.awaiting = "user"
        return StepResult(parsed=parsed, to_user=message, feedback=None, done=False)

    def user_turn(self, state: EpisodeState, reply: UserReply) -> None:
        if state.done or state.awaiting != "user":
            raise RuntimeError(f"{state.episode_id}: user reply out of turn (awaiting {state.awaiting})")
        content = "" if reply.message is None else str(reply.message)
        meta = dict(reply.meta)
        patterns = [p for p in reply.patterns if p in PATTERN_NAMES]
        unknown = [p for p in reply.patterns if p not in PATTERN_NAMES]
        if unknown:
            meta["unknown_patterns"] = unknown
        if not content.strip():
            meta["empty"] = True
        state.trace.append(
            TraceTurn(
                role="user", content=content, reasoning=reply.reasoning or None, patterns=patterns, meta=meta
            )
        )
        if reply.meta.get("goal_update"):
            self._apply_goal_update(state, reply.meta["goal_update"])
        if state.pending is not None:
            if reply_accepts(reply):
                state.final_action, state.accepted = state.pending, True
                state.pending = None
                self._finish(state, "accepted")
                return
            state.accepted = False
            state.pending = None
        if reply.ended:
            self._finish(state, "user_left")
        elif state.turns_left == 0:
            self._note(state, f"turn limit of {state.max_turns} agent messages reached", kind="turn_limit")
            self._finish(state, "turn_limit")
        else:
            state.awaiting = "agent"

    def verify(self, state: EpisodeState) -> Verdict:
        task = self.score(state)
        reward = min(1.0, max(0.0, task.reward - state.penalty))
        scores = {**task.scores, "task": round(task.reward, 6), "penalty": round(state.penalty, 6)}
        return Verdict(reward=round(reward, 6), success=task.success, scores=scores, notes=task.notes)

    # -- helpers ------------------------------------------------------------------------------

    def _apply_goal_update(self, state: EpisodeState, update: Any) -> None:
        """A user that changes its mind says so in meta["goal_update"]; the verifier follows it.

        Only slots the goal card lists under `changeable`, and only to one of the listed
        alternatives, so a user side cannot move the goal posts arbitrarily.
        """
        changeable = state.goal.slots.get("changeable") or {}
        if not isinstance(update, dict):
            self._note(state, f"ignored goal update {update!r}: not a mapping", kind="goal_update")
            return
        slots = dict(state.goal.slots)
        applied = {}
        for slot, value in update.items():
            if slot in changeable and value in changeable[slot]:
                applied[slot], slots[slot] = value, value
            else:
                self._note(
                    state,
                    f"ignored goal update {slot}={value!r}: not a listed alternative",
                    kind="goal_update",
                )
        if applied:
            state.hidden.setdefault("original_goal", state.goal.model_dump())
            state.hidden.setdefault("goal_changes", []).append({"turn": state.agent_turns, **applied})
            state.goal = state.goal.model_copy(update={"slots": slots})

    def _note(self, state: EpisodeState, text: str, kind: str = "note") -> None:
        state.trace.append(TraceTurn(role="environment", content=text, meta={"kind": kind}))

    def _finish(self, state: EpisodeState, reason: EndReason) -> None:
        state.done, state.awaiting, state.end_reason = True, "none", reason
        state.verdict = self.verify(state)
        if reason == "user_left" and state.agent_turns == 0:
            log.info("%s: the user left before the agent said anything", state.episode_id)
        log.debug("%s ended (%s): reward %.3f", state.episode_id, reason, state.verdict.reward)

    @staticmethod
    def user_messages(state: EpisodeState) -> list[str]:
        return [t.content for t in state.trace if t.role == "user"]


def action_specs(*specs: ActionSpec) -> tuple[ActionSpec, ...]:
    """A grammar, checked for duplicate types at import time."""
    types = [s.type for s in specs]
    dupes = sorted({t for t in types if types.count(t) > 1})
    if dupes:
        raise ValueError(f"duplicate action types {dupes}")
    return tuple(specs)


def pick(rng: random.Random, items: Sequence[Any], k: int | None = None) -> Any:
    """rng.choice / rng.sample over a sequence, in one readable call."""
    return rng.choice(list(items)) if k is None else rng.sample(list(items), k)
