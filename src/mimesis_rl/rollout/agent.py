"""`ModelAgent`: a language model as the agent side (`mimesis_rl.envs.protocols.AgentSide`).

One `act` call = one batched generate for every open dialogue. The agent keeps each dialogue's
token track (prompt, completion, env mask, log-probs) keyed by episode id: its own turns stay as
generated tokens, and only the messages that arrived since its last turn are rendered and
appended, so the record is exactly what the policy saw.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from mimesis_rl.envs.protocols import Observation
from mimesis_rl.models.inference.runner import ModelRunner
from mimesis_rl.models.inference.track import ChatTrack

log = logging.getLogger(__name__)


class ModelAgent:
    """AgentSide over a `ModelRunner`; `tracks[episode_id]` holds the token record of each dialogue."""

    def __init__(self, runner: ModelRunner, name: str = "model-agent") -> None:
        self.runner = runner
        self.name = name
        self.tracks: dict[str, ChatTrack] = {}

    def _track(self, obs: Observation) -> ChatTrack:
        """The dialogue's track, extended by the messages that arrived since the agent last spoke."""
        track = self.tracks.get(obs.episode_id)
        seen = len(track.messages_seen) if track else 0
        if track is None or obs.messages[:seen] != track.messages_seen:
            stale = track is not None and obs.turn > 1
            track = ChatTrack(prompt_ids=self.runner.chat.prompt_ids(obs.messages))
            self.tracks[obs.episode_id] = track
            if stale:  # mid-dialogue: the history was rewritten, so earlier tokens cannot be kept
                note = f"turn {obs.turn}: the dialogue history changed; token record restarted here"
                track.notes.append(note)
                log.warning("%s: %s", obs.episode_id, note)
        else:
            new = obs.messages[seen:]
            if not new:
                raise ValueError(f"{obs.episode_id}: asked to act twice without a new message")
            track.add_external(self.runner.chat.continuation_ids(new))
        track.messages_seen = [dict(m) for m in obs.messages]
        return track

    def release(self, episode_ids: Sequence[str]) -> None:
        """Drop the KV caches of finished dialogues (their token records stay)."""
        for eid in episode_ids:
            track = self.tracks.get(eid)
            if track is not None:
                track.kv = None

    def act(self, observations: Sequence[Observation]) -> list[str]:
        dupes = [eid for eid, n in Counter(o.episode_id for o in observations).items() if n > 1]
        if dupes:
            raise ValueError(
                f"episode ids {dupes} occur twice in one batch; every dialogue needs its own id "
                "(the rollout engine makes them unique)"
            )
        tracks = [self._track(obs) for obs in observations]
        keys = [
            f"agent:{obs.episode_id}:{len(track.turns)}"
            for obs, track in zip(observations, tracks, strict=True)
        ]
        gens = self.runner.generate([t.context for t in tracks], keys, [t.kv for t in tracks])
        messages = []
        for obs, track, gen in zip(observations, tracks, gens, strict=True):
            if gen is None:
                turn, size = len(track.turns) + 1, len(track.context)
                note = f"turn {turn}: context full ({size} tokens); sent an empty message"
                track.notes.append(note)
                log.warning("%s: %s", obs.episode_id, note)
                messages.append("")
                continue
            track.add_generated(gen)
            if not gen.stopped:
                # Close the turn so the next messages render as the template expects; the closing
                # token was not generated, so it is masked out.
                track.add_external([self.runner.chat.end_of_turn_id])
            text = self.runner.chat.decode(gen.token_ids)
            track.messages_seen.append({"role": "assistant", "content": text})
            messages.append(text)
        return messages
