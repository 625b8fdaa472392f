"""`CSD`, the driver: coaching, splicing, the teacher forward and the term in either form, per batch.

The agent trainer (`csd.trainer.CSDTrainer`) hands it TRL's generation batch (`advantage` form) or
micro-batch (`loss` form) with the per-row episode records; notes are cached per dialogue so every
micro-batch and GRPO iteration of a generation batch sees the same notes. `build_csd` builds one
from the settings, with its coach.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from mimesis_rl.agent.coach.base import Coach
from mimesis_rl.agent.coach.context import CoachContext, contexts_from_record
from mimesis_rl.agent.coach.factory import build_coach
from mimesis_rl.agent.coach.leaks import leaks, redact
from mimesis_rl.agent.csd.settings import CSDSettings
from mimesis_rl.agent.csd.splice import NoteTokens, Spliced, shuffled_notes, splice_notes
from mimesis_rl.agent.csd.teacher import EMATeacher
from mimesis_rl.agent.csd.term import sampled_token_term, token_logps


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
