"""One open dialogue of a `UserSimulator`, and how a turn that failed half-way is undone.

A session holds the simulator's role-flipped view of the dialogue twice: as chat messages (what a
remote server is sent, what is trimmed when the context is full) and, for a local runner, as the token
track whose KV cache the next turn reuses. `SessionSnapshot` records what a turn changes, so a batch
that raises leaves every session as it was (the server retries the others without the request that
broke it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mimesis_rl.envs.protocols import SessionSpec, UserReply
from mimesis_rl.models.inference.track import ChatTrack


@dataclass
class Session:
    """One open dialogue: the simulator's role-flipped view of it, as messages and as tokens."""

    spec: SessionSpec
    messages: list[dict[str, str]]
    track: ChatTrack | None = None  # token context (+ KV cache) of the last turn, None until first use
    replies: list[UserReply] = field(default_factory=list)
    ended: bool = False
    end_reason: str | None = None


@dataclass
class SessionSnapshot:
    """What a turn changes in a session, to undo a turn that failed half-way."""

    messages: int
    replies: int
    ended: bool
    end_reason: str | None
    track: ChatTrack | None
    track_lengths: tuple[int, int, int, int] | None

    @classmethod
    def of(cls, session: Session) -> SessionSnapshot:
        t = session.track
        lengths = None if t is None else (len(t.completion_ids), len(t.mask), len(t.logprobs), len(t.turns))
        return cls(len(session.messages), len(session.replies), session.ended, session.end_reason, t, lengths)

    def restore(self, session: Session) -> None:
        del session.messages[self.messages:]
        del session.replies[self.replies:]
        session.ended, session.end_reason, session.track = self.ended, self.end_reason, self.track
        if self.track is not None and self.track_lengths is not None:
            ids, mask, logprobs, turns = self.track_lengths
            del self.track.completion_ids[ids:], self.track.mask[mask:]
            del self.track.logprobs[logprobs:], self.track.turns[turns:]
            self.track.kv = None  # the cache may hold the failed turn's keys: recomputed on the next turn
