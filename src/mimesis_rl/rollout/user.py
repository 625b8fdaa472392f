"""`ModelUser`: a language model as the user side (`mimesis_rl.envs.base.UserSide`).

It speaks the simulator's turn format (`mimesis_rl.simulator.format`): a system card from the
goal and persona, the dialogue with roles flipped, `<think>reasoning</think>message` out. The
reasoning goes to `UserReply.reasoning` (kept in the trace, never shown to the agent); past turns
keep their reasoning in the simulator's own context, as in training. One `respond` call = one
batched generate over every open session. Works for a trained simulator adapter and for a
prompted base model alike (adapter None + `behaviours` for a persona).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.envs.base import SessionSpec, UserReply
from mimesis_rl.rollout.runner import ModelRunner
from mimesis_rl.rollout.track import ChatTrack
from mimesis_rl.simulator.api import prompted_card
from mimesis_rl.simulator.format import OPENING_CUE, ParseStats, system_card

log = logging.getLogger(__name__)


@dataclass
class UserSession:
    """One open dialogue of a ModelUser: its spec, token track and sampling key."""

    spec: SessionSpec
    key: str
    track: ChatTrack
    raw: list[str] = field(default_factory=list)


class ModelUser:
    """UserSide over a `ModelRunner`."""

    def __init__(
        self,
        runner: ModelRunner,
        name: str = "model-user",
        behaviours: Sequence[str] = (),
        persona: Mapping[str, Any] | None = None,
        card_style: str = "simulator",
    ) -> None:
        """`behaviours` (pattern names) and `persona` (shown in the card, before the scenario's own
        persona) turn one model into different users, e.g. the prompted panel members.
        `card_style`: `simulator` (the trained turn format, `<think>` first) or `prompted` (a plain
        role-play prompt for an instruct model that never learned the format), as in
        `mimesis_rl.simulator.api.UserSimulator`."""
        if card_style not in ("simulator", "prompted"):
            raise ValueError(f"card_style must be 'simulator' or 'prompted', got {card_style!r}")
        self.runner = runner
        self.name = name
        self.behaviours = tuple(behaviours)
        self.persona = dict(persona or {})
        self.card_style = card_style
        self.stats = ParseStats()
        self._occurrences: Counter[tuple[str, int]] = Counter()

    def card(self, spec: SessionSpec) -> str:
        """The system prompt of one session; a scenario may name behaviours in `persona["behaviours"]`."""
        persona = {**self.persona, **spec.persona}
        behaviours = list(persona.pop("behaviours", None) or self.behaviours)
        if self.card_style == "prompted":
            return prompted_card(spec.domain, spec.goal, persona or None, behaviours)
        return system_card(spec.domain, spec.goal, persona or None, behaviours)

    def start(self, specs: list[SessionSpec]) -> list[UserSession]:
        sessions = []
        for spec in specs:
            # Same (domain, seed) played again (GRPO groups) gets a fresh sampling key: k-th occurrence.
            nth = self._occurrences[(spec.domain, spec.seed)]
            self._occurrences[(spec.domain, spec.seed)] += 1
            card = self.card(spec)
            prompt = self.runner.chat.prompt_ids(
                [{"role": "system", "content": card}, {"role": "user", "content": OPENING_CUE}]
            )
            sessions.append(
                UserSession(
                    spec=spec, key=f"user:{spec.domain}:{spec.seed}:{nth}", track=ChatTrack(prompt_ids=prompt)
                )
            )
        return sessions

    def opening(self, sessions: list[UserSession]) -> list[UserReply]:
        return self._speak(sessions)

    def respond(self, sessions: list[UserSession], agent_messages: list[str]) -> list[UserReply]:
        if len(sessions) != len(agent_messages):
            raise ValueError(f"{len(sessions)} sessions but {len(agent_messages)} agent messages")
        for session, message in zip(sessions, agent_messages, strict=True):
            session.track.add_external(
                self.runner.chat.continuation_ids([{"role": "user", "content": message}])
            )
        return self._speak(sessions)

    def _speak(self, sessions: list[UserSession]) -> list[UserReply]:
        keys = [f"{s.key}:{len(s.track.turns)}" for s in sessions]
        gens = self.runner.generate([s.track.context for s in sessions], keys, [s.track.kv for s in sessions])
        replies = []
        for session, gen in zip(sessions, gens, strict=True):
            if gen is None:
                note = f"context full ({len(session.track.context)} tokens): the simulated user leaves"
                session.track.notes.append(note)
                replies.append(UserReply(message="", ended=True, meta={"error": note}))
                continue
            session.track.add_generated(gen)
            if not gen.stopped:
                session.track.add_external([self.runner.chat.end_of_turn_id])
            raw = self.runner.chat.decode(gen.token_ids)
            session.raw.append(raw)
            parsed = self.stats.parse(raw)
            meta: dict[str, object] = {}
            if parsed.repairs or parsed.error:
                meta["raw"] = raw
            if parsed.repairs:
                meta["repairs"] = list(parsed.repairs)
            if parsed.error:
                meta["error"] = f"simulator output rejected: {parsed.error}"
            if not gen.stopped:
                meta["truncated"] = True
            replies.append(
                UserReply(message=parsed.message, reasoning=parsed.reasoning, ended=parsed.ended, meta=meta)
            )
        return replies
