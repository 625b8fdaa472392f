"""`MixedUsers`: one UserSide that routes each dialogue to its own user side.

Why: a rollout batch can mix a model-backed simulator with scripted users (or several simulators);
each round still makes exactly one call per distinct user side, with that side's open dialogues.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mimesis_rl.envs.protocols import SessionSpec, UserReply, UserSide


class MixedUsers:
    """Dialogue i is played by `sides[i]`; `start` must be called with specs in that same order."""

    def __init__(self, sides: Sequence[UserSide]) -> None:
        self.sides = list(sides)
        self.name = "mixed(" + ",".join(dict.fromkeys(s.name for s in self.sides)) + ")"

    @staticmethod
    def _groups(handles: Sequence[tuple[UserSide, Any]]) -> dict[int, tuple[UserSide, list[int]]]:
        groups: dict[int, tuple[UserSide, list[int]]] = {}
        for pos, (side, _) in enumerate(handles):
            groups.setdefault(id(side), (side, []))[1].append(pos)
        return groups

    def start(self, specs: list[SessionSpec]) -> list[tuple[UserSide, Any]]:
        if len(specs) != len(self.sides):
            raise ValueError(f"{len(specs)} sessions for {len(self.sides)} assigned user sides")
        out: list[Any] = [None] * len(specs)
        for side, positions in self._groups([(s, None) for s in self.sides]).values():
            for pos, handle in zip(positions, side.start([specs[p] for p in positions]), strict=True):
                out[pos] = (side, handle)
        return out

    def _route(self, sessions: list[tuple[UserSide, Any]], messages: list[str] | None) -> list[UserReply]:
        out: list[Any] = [None] * len(sessions)
        for side, positions in self._groups(sessions).values():
            handles = [sessions[p][1] for p in positions]
            if messages is None:
                replies = side.opening(handles)
            else:
                replies = side.respond(handles, [messages[p] for p in positions])
            for pos, reply in zip(positions, replies, strict=True):
                out[pos] = reply
        return out

    def opening(self, sessions: list[tuple[UserSide, Any]]) -> list[UserReply]:
        return self._route(sessions, None)

    def respond(self, sessions: list[tuple[UserSide, Any]], agent_messages: list[str]) -> list[UserReply]:
        return self._route(sessions, agent_messages)
