"""CSD, coached on-policy self-distillation: the policy given the coach's notes teaches itself without them.

For each agent turn of a rollout, the coach (`agent.coach`) writes a note from hindsight the agent did
not have. The **teacher** sequence is the student's token sequence with each note spliced in, as
chat-template tokens (a `system` message "Coach note: …"), right before the assistant header of the
turn it coaches; nothing is re-rendered, so the agent's tokens are the same ids in both sequences and
`splice_notes` returns the index map between them. The **student** is the policy on its own sequence.

Per agent token y (sampled by the student), the term is the reverse KL estimated on the sample,
`log s(y) - log t(y)`, with the gradient of TRL's sampled-token self-distillation estimator
(`trl.experimental.sdpo.loss_utils.compute_sampled_token_self_distillation_loss`:
`(log s - log t).detach() * log s`), weighted by λ. Two places to put it (`form` in params):

- `advantage` (default): the teacher is run once per generation batch (no grad) and the term enters
  GRPO's advantages per token, `A_t = A - λ (log s_old(y_t) - log t(y_t))`, with `log s_old` the
  sampling log-probs the rollout already recorded. On-policy (one GRPO iteration) this is the same
  gradient as the loss form (measured: `benchmarks/csd.py`, cosine 1.0) for one teacher forward
  and no second student forward+backward;
- `loss`: `λ · mean((log s - log t).detach() · log s)` added to the loss through the agent trainer's
  `additional_loss` hook (a student forward with grad of its own, plus the teacher forward).

`CSDTrainer` plugs it into the agent's GRPO trainer by overriding its hooks (see its docstring).

Teacher weights: `live` (the policy as it is) or `ema` (an exponential moving average of the trainable
weights, swapped in for the teacher forward). Control: `shuffle: true` gives each dialogue the notes of
another dialogue (another episode seed). λ = 0 is plain RL (no coach, no teacher forward).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from mimesis_rl.agent.coach import (
    COACHES,
    Coach,
    CoachContext,
    build_coach,
    contexts_from_record,
    leaks,
    redact,
)
from mimesis_rl.agent.grpo import AgentGRPOTrainer, LossTerm
from mimesis_rl.models.inference.chat import DUMMY_CHAT, template_ids

log = logging.getLogger(__name__)



# ---------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class CSDSettings:
    """`agent_rl.csd` in params.yaml.

    enabled: CSD on; lam: λ, the weight of the per-token reverse KL (0 = plain RL, nothing computed).
    form: `advantage` (per-token advantage term, default) or `loss` (added loss term).
    teacher: `live` (the current policy) or `ema` (moving average of the trainable weights, `ema_rate`).
    coach: `template`, `model` or `llm`; coach_options: that backend's keyword options (an `llm`
        endpoint: base_url_env/model_env/api_key_env or literal base_url/model, timeout_s, …).
    horizon: how many following user turns a note may read.
    shuffle: the control: notes from another dialogue of the batch (another episode seed).
    redact: replace private slot values written verbatim in a note by their label (the leak guard).
    note_role, note_prefix: how a note is rendered as a chat message; max_note_tokens: notes are cut
        to fit; max_teacher_tokens: a teacher sequence longer than this (or the model's context) is
        skipped (counted in `csd/rows_skipped`).
    teacher_batch_size: rows per teacher forward.
    """

    enabled: bool = False
    lam: float = 0.05
    form: str = "advantage"
    teacher: str = "live"
    ema_rate: float = 0.1
    coach: str = "template"
    coach_options: dict[str, Any] = field(default_factory=dict)
    horizon: int = 2
    shuffle: bool = False
    redact: bool = True
    note_role: str = "system"
    note_prefix: str = "Coach note: "
    max_note_tokens: int = 72
    max_teacher_tokens: int | None = None
    teacher_batch_size: int = 4

    def __post_init__(self) -> None:
        where = "agent_rl.csd"
        if self.lam < 0:
            raise ValueError(f"{where}.lam must be >= 0, got {self.lam}")
        if self.form not in ("advantage", "loss"):
            raise ValueError(f"{where}.form must be 'advantage' or 'loss', got {self.form!r}")
        if self.teacher not in ("live", "ema"):
            raise ValueError(f"{where}.teacher must be 'live' or 'ema', got {self.teacher!r}")
        if not 0.0 < self.ema_rate <= 1.0:
            raise ValueError(f"{where}.ema_rate must be in (0, 1], got {self.ema_rate}")
        if self.coach not in COACHES:
            raise ValueError(f"{where}.coach must be one of {COACHES}, got {self.coach!r}")
        if self.horizon < 1 or self.max_note_tokens < 8 or self.teacher_batch_size < 1:
            raise ValueError(f"{where}: horizon >= 1, max_note_tokens >= 8, teacher_batch_size >= 1")

    @property
    def active(self) -> bool:
        return self.enabled and self.lam > 0

    @classmethod
    def from_section(cls, section: Mapping[str, Any] | None, where: str = "agent_rl.csd") -> CSDSettings:
        section = dict(section or {})
        if "lambda" in section:
            section["lam"] = section.pop("lambda")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"params.yaml `{where}`: unknown key(s) {unknown}; known: {sorted(known)}")
        return cls(**section)


# ---------------------------------------------------------------------------------------------
# Note tokens and splicing


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


# ---------------------------------------------------------------------------------------------
# Log-probs at chosen positions


def _lm_parts(model: Any) -> tuple[Any, Any]:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    body = getattr(base, base.base_model_prefix)
    return body, base.get_output_embeddings()


def token_logps(
    model: Any,
    sequences: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int]],
    temperature: float = 1.0,
    batch_size: int = 4,
    pad_id: int = 0,
) -> list[torch.Tensor]:
    """log p(seq[i] | seq[:i]) at each position i of each row (right padding, logits only where asked).

    Only the hidden states at the asked positions go through the output layer, so a 49k vocabulary
    over long dialogues costs (tokens asked × vocab), not (sequence × vocab). Grad flows when enabled.
    """
    body, head = _lm_parts(model)
    device = next(model.parameters()).device
    out: list[torch.Tensor] = []
    for start in range(0, len(sequences), batch_size):
        seqs, pos = sequences[start : start + batch_size], positions[start : start + batch_size]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
        attn = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):
            ids[r, : len(s)] = torch.tensor(list(s), dtype=torch.long)
            attn[r, : len(s)] = 1
        hidden = body(input_ids=ids.to(device), attention_mask=attn.to(device)).last_hidden_state
        rows = torch.cat([torch.full((len(p),), r, dtype=torch.long) for r, p in enumerate(pos)])
        cols = torch.cat([torch.tensor(list(p), dtype=torch.long) for p in pos])
        if cols.numel() == 0:
            out += [hidden.new_zeros(0) for _ in pos]
            continue
        logits = head(hidden[rows.to(device), (cols - 1).to(device)]).float() / temperature
        chosen = ids[rows, cols].to(device)
        logps = torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None]).squeeze(1)
        out += list(torch.split(logps, [len(p) for p in pos]))
    return out


def sampled_token_term(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Per-token loss whose gradient is ∇ reverse-KL(s‖t) on sampled tokens: TRL's sampled-token
    estimator (`(log s - log t).detach() * log s`) on log-probs already gathered."""
    return (student - teacher).detach() * student


# ---------------------------------------------------------------------------------------------
# EMA teacher


class EMATeacher:
    """A moving average of the model's trainable weights, swapped in for the teacher forward."""

    def __init__(self, model: Any, rate: float) -> None:
        self.rate = rate
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("csd teacher 'ema': the model has no trainable weights to average")
        self.shadow = [p.detach().clone() for p in self.params]
        self.step: int | None = None

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Fold the current weights in once per optimiser step."""
        if self.step == step:
            return
        if self.step is not None:
            for s, p in zip(self.shadow, self.params, strict=True):
                s.lerp_(p.detach(), self.rate)
        self.step = step

    @contextmanager
    @torch.no_grad()
    def swapped(self) -> Iterator[None]:
        live = [p.detach().clone() for p in self.params]
        for p, s in zip(self.params, self.shadow, strict=True):
            p.copy_(s)
        try:
            yield
        finally:
            for p, v in zip(self.params, live, strict=True):
                p.copy_(v)


# ---------------------------------------------------------------------------------------------
# The CSD driver


def _note_key(episode: Mapping[str, Any]) -> str:
    """Notes are cached per dialogue *content*: episode ids repeat when the prompt set cycles."""
    turns = json.dumps(episode.get("turns"), sort_keys=True, default=str)
    return f"{episode['episode_id']}:{hashlib.sha1(turns.encode()).hexdigest()}"


@dataclass
class Prepared:
    """A micro-batch's rows after coaching and splicing (`rows[i]` None: no CSD on that row)."""

    rows: list[Spliced | None]
    metrics: dict[str, float]


class CSD:
    """Coaching, splicing, teacher log-probs and the term, for the agent trainer.

    `prepare(episodes, prompts, completions, masks)` coaches and splices (notes cached per episode id,
    so every micro-batch and GRPO iteration of a generation batch sees the same notes);
    `extra_loss(model, inputs)` is the `loss` form; `advantages(model, output)` the `advantage` form.
    """

    def __init__(
        self,
        settings: CSDSettings,
        tokenizer: Any,
        coach: Coach,
        *,
        seed: int = 0,
        temperature: float = 1.0,
        max_positions: int | None = None,
    ) -> None:
        self.settings, self.coach, self.seed, self.temperature = settings, coach, seed, temperature
        self.tokenizer = tokenizer
        self.notes_fmt = NoteTokens(
            tokenizer, settings.note_role, settings.note_prefix, settings.max_note_tokens
        )
        self.pad_id = int(
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        limits = [x for x in (settings.max_teacher_tokens, max_positions) if x]
        self.max_tokens = min(limits) if limits else None
        self.ema: EMATeacher | None = None
        self._notes: OrderedDict[str, tuple[list[str], dict[str, int]]] = OrderedDict()
        self.last_notes: dict[str, list[str]] = {}

    # -- coaching -------------------------------------------------------------------------

    def _coach(self, episodes: Sequence[Mapping[str, Any]]) -> list[list[str] | None]:
        """Notes per row (None: the trace and the token spans disagree, no CSD for that row)."""
        todo: list[tuple[int, list[CoachContext]]] = []
        out: list[list[str] | None] = [None] * len(episodes)
        for i, ep in enumerate(episodes):
            key = _note_key(ep)
            if key in self._notes:
                out[i] = self._notes[key][0]
                continue
            contexts = contexts_from_record(ep, self.settings.horizon)
            if len(contexts) != len(ep.get("agent_spans") or []):
                continue
            todo.append((i, contexts))
        flat = [c for _, cs in todo for c in cs]
        written = self.coach.notes(flat) if flat else []
        k = 0
        for i, contexts in todo:
            ep = episodes[i]
            notes = written[k : k + len(contexts)]
            k += len(contexts)
            raw_leaks = sum(1 for n, c in zip(notes, contexts, strict=True) if leaks(n, c.goal))
            if self.settings.redact:
                notes = [redact(n, c.goal, c.slot_labels) for n, c in zip(notes, contexts, strict=True)]
            kept_leaks = sum(1 for n, c in zip(notes, contexts, strict=True) if leaks(n, c.goal))
            self._notes[_note_key(ep)] = (notes, {"raw": raw_leaks, "kept": kept_leaks})
            out[i] = notes
        while len(self._notes) > 4096:
            self._notes.popitem(last=False)
        return out

    def prepare(
        self,
        episodes: Sequence[Mapping[str, Any]],
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        masks: Sequence[Sequence[int]],
    ) -> Prepared:
        notes = self._coach(episodes)
        ids = [str(ep["episode_id"]) for ep in episodes]
        if self.settings.shuffle:
            have = [n or [] for n in notes]
            swapped = shuffled_notes(have, ids, self.seed)
            notes = [s if n is not None else None for s, n in zip(swapped, notes, strict=True)]
        rows: list[Spliced | None] = []
        n_notes = raw = kept = note_tokens = skipped = 0
        for i, (ep, row_notes) in enumerate(zip(episodes, notes, strict=True)):
            if row_notes is None or not any(masks[i]):
                rows.append(None)
                skipped += 1
                continue
            goal_contexts = contexts_from_record(ep, self.settings.horizon)
            final_leaks = sum(1 for n, c in zip(row_notes, goal_contexts, strict=False) if leaks(n, c.goal))
            cached = self._notes.get(_note_key(ep))
            raw += cached[1]["raw"] if cached and not self.settings.shuffle else final_leaks
            kept += final_leaks
            n_notes += len(row_notes)
            spans = [list(map(int, s)) for s in ep["agent_spans"]]
            spliced = splice_notes(
                prompts[i],
                completions[i],
                masks[i],
                spans,
                [self.notes_fmt.ids(n) for n in row_notes],
                self.notes_fmt.header,
                where=f"episode {ids[i]!r}",
            )
            if self.max_tokens and len(spliced.teacher_ids) > self.max_tokens:
                rows.append(None)
                skipped += 1
                continue
            note_tokens += spliced.note_tokens
            rows.append(spliced)
            self.last_notes[ids[i]] = list(row_notes)
        metrics = {
            "csd/notes": float(n_notes),
            "csd/leak_rate_raw": raw / n_notes if n_notes else 0.0,
            "csd/leak_rate": kept / n_notes if n_notes else 0.0,
            "csd/note_tokens_per_row": note_tokens / max(1, len(rows) - skipped),
            "csd/rows_skipped": float(skipped),
            "csd/lambda": float(self.settings.lam),
        }
        return Prepared(rows, metrics)

    # -- teacher --------------------------------------------------------------------------

    @contextmanager
    def _teacher_weights(self, model: Any, step: int) -> Iterator[None]:
        if self.settings.teacher == "live":
            yield
            return
        if self.ema is None:
            self.ema = EMATeacher(model, self.settings.ema_rate)
        self.ema.update(step)
        with self.ema.swapped():
            yield

    @torch.no_grad()
    def teacher_logps(self, model: Any, prepared: Prepared, step: int = 0) -> list[torch.Tensor | None]:
        live = [r for r in prepared.rows if r is not None]
        was_training = model.training
        model.eval()  # no dropout in the teacher
        try:
            with self._teacher_weights(model, step):
                got = token_logps(
                    model,
                    [r.teacher_ids for r in live],
                    [r.teacher_pos for r in live],
                    self.temperature,
                    self.settings.teacher_batch_size,
                    self.pad_id,
                )
        finally:
            model.train(was_training)
        it = iter(got)
        return [next(it) if r is not None else None for r in prepared.rows]

    # -- the two forms --------------------------------------------------------------------

    def _rows_from(
        self, inputs: Mapping[str, Any]
    ) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
        """Unpadded prompt, completion and env mask per row of TRL's (padded) batch."""
        episodes = inputs.get("episodes")
        if episodes is None:
            raise ValueError(
                "CSD needs inputs['episodes'] (per-row transcript records from the agent trainer)"
            )
        prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
        cmask = inputs["completion_mask"]
        tmask = inputs.get("tool_mask")
        prompts, completions, masks = [], [], []
        for i, ep in enumerate(episodes):
            plen = int(ep["prompt_len"])
            prompts.append(prompt_ids[i, prompt_ids.size(1) - plen :].tolist())
            spans = ep.get("agent_spans") or []
            n = max((int(end) for _, end in spans), default=0) if int(cmask[i].sum()) else 0
            completions.append(completion_ids[i, :n].tolist())
            mask = cmask[i, :n] * tmask[i, :n] if tmask is not None else cmask[i, :n]
            masks.append(mask.int().tolist())
        return prompts, completions, masks

    def _gap_metrics(self, student: list[torch.Tensor], teacher: list[torch.Tensor]) -> dict[str, float]:
        if not student:
            return {"csd/logp_gap": 0.0, "csd/reverse_kl": 0.0, "csd/loss": 0.0, "csd/agent_tokens": 0.0}
        s, t = torch.cat(student).detach(), torch.cat(teacher)
        kl = float((s - t).mean()) if s.numel() else 0.0
        return {
            "csd/logp_gap": -kl,
            "csd/abs_logp_gap": float((s - t).abs().mean()) if s.numel() else 0.0,
            "csd/reverse_kl": kl,
            "csd/loss": self.settings.lam * kl,
            "csd/agent_tokens": float(s.numel()),
        }

    def extra_loss(
        self, model: Any, inputs: Mapping[str, Any], step: int = 0
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """The `loss` form: λ · mean over agent tokens of TRL's sampled-token estimator."""
        prompts, completions, masks = self._rows_from(inputs)
        prepared = self.prepare(inputs["episodes"], prompts, completions, masks)
        start = time.perf_counter()
        teacher = self.teacher_logps(model, prepared, step)
        live = [
            (r, t) for r, t in zip(prepared.rows, teacher, strict=True) if r is not None and t is not None
        ]
        zero = next(model.parameters()).sum() * 0.0
        if not live:
            return zero, prepared.metrics
        student = token_logps(
            model,
            [list(prompts[i]) + list(completions[i]) for i, r in enumerate(prepared.rows) if r is not None],
            [r.student_pos for r, _ in live],
            self.temperature,
            self.settings.teacher_batch_size,
            self.pad_id,
        )
        s, t = torch.cat(student), torch.cat([t for _, t in live])
        loss = self.settings.lam * sampled_token_term(s, t).sum() / max(1, s.numel()) if s.numel() else zero
        metrics = {
            **prepared.metrics,
            **self._gap_metrics(student, [t for _, t in live]),
            "csd/seconds": time.perf_counter() - start,
        }
        return loss + zero, metrics

    def advantages(self, model: Any, output: dict[str, Any], step: int = 0) -> dict[str, float]:
        """The `advantage` form: turn `output["advantages"]` (B,) into (B, T) with the per-token term."""
        prompts, completions, masks = self._rows_from(output)
        prepared = self.prepare(output["episodes"], prompts, completions, masks)
        start = time.perf_counter()
        teacher = self.teacher_logps(model, prepared, step)
        sampling = output.get("sampling_per_token_logps")
        if sampling is None:
            raise ValueError(
                "csd form 'advantage' needs the rollout's log-probs (rollout_func must return logprobs)"
            )
        adv = output["advantages"]
        width = output["completion_ids"].size(1)
        term = torch.zeros((adv.size(0), width), dtype=torch.float32, device=adv.device)
        students, teachers = [], []
        for i, (row, t) in enumerate(zip(prepared.rows, teacher, strict=True)):
            if row is None or t is None:
                continue
            idx = torch.tensor(row.completion_idx, dtype=torch.long, device=adv.device)
            keep = idx < width
            idx, t = idx[keep], t.to(adv.device)[keep]
            s = sampling[i, idx].float()
            term[i, idx] = s - t
            students.append(s)
            teachers.append(t)
        lam = self.settings.lam
        base = adv if adv.dim() == 2 else adv.unsqueeze(1).expand(-1, width)
        output["advantages"] = (base - lam * term).to(adv.dtype)
        return {
            **prepared.metrics,
            **self._gap_metrics(students, teachers),
            "csd/seconds": time.perf_counter() - start,
        }


def episodes_from_result(result: Any) -> list[dict[str, Any]]:
    """Per-row episode records of a `RolloutResult` as the CSD driver reads them: the transcript plus
    `agent_spans` (each agent turn's [start, end) in `completion_ids`) and `prompt_len`."""
    out = []
    for record, track in zip(result.records(), result.tracks, strict=True):
        if track is None:
            raise ValueError(f"episode {record['episode_id']!r}: no token track; CSD needs a model agent")
        record["agent_spans"] = [[t.start, t.end] for t in track.turns]
        record["prompt_len"] = len(track.prompt_ids)
        out.append(record)
    return out


def build_csd(
    settings: CSDSettings, tokenizer: Any, model: Any = None, seed: int = 0, temperature: float = 1.0
) -> CSD:
    """A CSD driver (its coach built from the settings; the `model` coach reuses the policy's base)."""
    coach = build_coach(settings.coach, settings.coach_options, model=model, tokenizer=tokenizer, seed=seed)
    config = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return CSD(
        settings,
        tokenizer,
        coach,
        seed=seed,
        temperature=temperature,
        max_positions=int(config) if config else None,
    )


class CSDTrainer(AgentGRPOTrainer):
    """The agent's GRPO trainer with CSD (`agent_rl.csd`), as two overrides of its documented hooks.

    `form: advantage`: `_generate_and_score_completions` calls `super()` (TRL's scoring plus the agent
    trainer's episodes and metrics), then adds the per-token term to the advantages. `form: loss`:
    `additional_loss` is CSD's loss term. λ = 0 builds the driver (its coach) but runs nothing: plain
    RL. The driver is `self.csd` (its `last_notes` are the latest batch's notes); the time it takes
    is `timing["teacher_forward"]`.
    """

    def __init__(self, *args: Any, csd: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = CSDSettings.from_section(csd)
        self.csd = build_csd(
            settings,
            self.processing_class,
            self.accelerator.unwrap_model(self.model),
            seed=int(self.args.seed),
            temperature=float(self.temperature),
        )

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        settings = self.csd.settings
        if not settings.active or settings.form != "advantage":
            return output
        start = time.perf_counter()
        policy = self.accelerator.unwrap_model(self.model)
        metrics = self.csd.advantages(policy, output, self.state.global_step)
        self.timing["teacher_forward"].append(time.perf_counter() - start)
        self.record_metrics(metrics)
        return output

    def additional_loss(self, model: Any, inputs: dict[str, Any]) -> LossTerm | None:
        settings = self.csd.settings
        if not settings.active or settings.form != "loss":
            return super().additional_loss(model, inputs)
        return self.csd.extra_loss(self.accelerator.unwrap_model(model), inputs, self.state.global_step)
