"""Notes into the teacher sequence: each note as chat-template tokens, spliced before the turn it coaches.

Nothing is re-rendered: the agent's tokens are the same ids in the student and the teacher sequence,
and `splice_notes` returns the index map between them. `shuffled_notes` is the control (notes of
another dialogue).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.models.inference.chat import DUMMY_CHAT, template_ids


class NoteTokens:
    """A note as chat-template tokens (a whole message), and the assistant header notes go before."""

    def __init__(
        self, tokenizer: Any, role: str = "system", prefix: str = "Coach note: ", max_tokens: int = 72
    ) -> None:
        self.tokenizer, self.role, self.prefix, self.max_tokens = tokenizer, role, prefix, max_tokens
        closed = template_ids(tokenizer, DUMMY_CHAT, generation_prompt=False)
        with_gen = template_ids(tokenizer, DUMMY_CHAT, generation_prompt=True)
        if with_gen[: len(closed)] != closed or len(with_gen) == len(closed):
            raise ValueError("the chat template has no separate generation prompt; notes cannot be spliced")
        self.header = with_gen[len(closed) :]
        self._closed = closed

    def ids(self, note: str) -> list[int]:
        """The tokens of one note message ([] for an empty note), cut to `max_tokens` by words."""
        words = note.split()
        while words:
            message = {"role": self.role, "content": self.prefix + " ".join(words)}
            full = template_ids(self.tokenizer, [*DUMMY_CHAT, message], generation_prompt=False)
            if full[: len(self._closed)] != self._closed:
                raise ValueError("the chat template is not prefix preserving; notes cannot be spliced")
            segment = full[len(self._closed) :]
            if len(segment) <= self.max_tokens:
                return segment
            words = (
                words[: max(1, int(len(words) * self.max_tokens / len(segment)) - 1)]
                if len(words) > 1
                else []
            )
        return []


@dataclass
class Spliced:
    """One row: the teacher sequence, and where each agent token sits in the student and the teacher.

    `student_pos[i]` and `teacher_pos[i]` are the positions of the i-th agent token (env mask 1) in
    `prompt + completion` and in `teacher_ids`; the token id is the same at both (checked).
    `completion_idx[i]` is its index in the completion (= student_pos[i] - len(prompt)).
    """

    teacher_ids: list[int]
    student_pos: list[int]
    teacher_pos: list[int]
    completion_idx: list[int]
    note_tokens: int
    note_positions: list[int] = field(default_factory=list)


def splice_notes(
    prompt_ids: Sequence[int],
    completion_ids: Sequence[int],
    env_mask: Sequence[int],
    spans: Sequence[Sequence[int]],
    notes: Sequence[Sequence[int]],
    header: Sequence[int],
    where: str = "row",
) -> Spliced:
    """Insert `notes[k]` before the assistant header that opens agent turn k (`spans[k]` = [start, end)
    in completion coordinates); the agent's tokens are copied, never re-tokenized."""
    if len(notes) != len(spans):
        raise ValueError(f"{where}: {len(notes)} notes for {len(spans)} agent turns")
    if len(env_mask) != len(completion_ids):
        raise ValueError(f"{where}: env_mask has {len(env_mask)} entries for {len(completion_ids)} tokens")
    student = list(prompt_ids) + list(completion_ids)
    p, h = len(prompt_ids), len(header)
    cuts: list[int] = []
    previous_end = 0
    for k, (start, end) in enumerate(spans):
        if not (previous_end <= start <= end <= len(completion_ids)):
            raise ValueError(
                f"{where}: agent turn {k + 1} span [{start}, {end}) out of order or out of range"
            )
        at = p + start - h
        if at < 0 or student[at : at + h] != list(header):
            raise ValueError(
                f"{where}: agent turn {k + 1} is not preceded by the assistant header "
                f"{list(header)} (found {student[max(0, at) : at + h]})"
            )
        if any(env_mask[j] != 1 for j in range(start, end)):
            raise ValueError(f"{where}: agent turn {k + 1} holds tokens with env_mask 0")
        cuts.append(at)
        previous_end = end
    in_turns = {j for start, end in spans for j in range(start, end)}
    stray = [j for j, m in enumerate(env_mask) if m == 1 and j not in in_turns]
    if stray:
        raise ValueError(
            f"{where}: {len(stray)} agent tokens (env_mask 1) outside every turn span, first at {stray[0]}"
        )
    teacher: list[int] = []
    shift_at: list[tuple[int, int]] = []  # (student position, cumulative shift from there on)
    last, shift = 0, 0
    note_positions: list[int] = []
    for at, note in zip(cuts, notes, strict=True):
        teacher += student[last:at]
        note_positions += range(len(teacher), len(teacher) + len(note))
        teacher += list(note)
        shift += len(note)
        shift_at.append((at, shift))
        last = at
    teacher += student[last:]
    completion_idx = [j for j, m in enumerate(env_mask) if m == 1]
    student_pos = [p + j for j in completion_idx]
    teacher_pos = []
    for pos in student_pos:
        s = 0
        for at, cumulative in shift_at:
            if pos >= at:
                s = cumulative
        teacher_pos.append(pos + s)
    for sp, tp in zip(student_pos, teacher_pos, strict=True):
        if student[sp] != teacher[tp]:  # pragma: no cover - guaranteed by construction
            raise AssertionError(f"{where}: agent token at {sp} changed in the teacher sequence")
    return Spliced(teacher, student_pos, teacher_pos, completion_idx, shift, note_positions)


def shuffled_notes(notes: Sequence[Sequence[str]], episode_ids: Sequence[str], seed: int) -> list[list[str]]:
    """The control: row i gets the notes of another row with a different episode seed (per turn, cycled)."""
    base = [eid.split("#")[0] for eid in episode_ids]
    n = len(notes)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    out: list[list[str]] = []
    for i in range(n):
        donors = [j for j in order if base[j] != base[i] and notes[j]] or [
            j for j in order if j != i and notes[j]
        ]
        donor = notes[donors[0]] if donors else []
        out.append([donor[k % len(donor)] if donor else "" for k in range(len(notes[i]))])
    return out
