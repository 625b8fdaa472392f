"""`UserSimulator`: the one runtime that turns a language model into a user.

    sim = UserSimulator.load("models:/mimesis-simulator@candidate")   # or a folder, or "assistant"
    sessions = sim.start([SessionSpec(goal=card, domain="shopping")])
    first = sim.opening(sessions)[0]                  # UserReply(message, reasoning, ended)
    reply = sim.respond(sessions, ["What is your budget?"])[0]

Every LM user turn in the project comes from here: fidelity evaluation, the `sim_rl`
discriminator, `mimesis serve`, `mimesis sim chat`, `mimesis envs rollout` and the agent
trainers. One rule set, so the user the Fidelity Index measures is the user agents meet:

- the card: `system_card` (trained format) or `prompted_card` (the assistant baseline), with at
  most `max_behaviours` behaviour lines;
- generation through a `ModelRunner` (batched, per-dialogue KV reuse, seeded per-row sampling:
  the same episode seed gives the same user randomness whichever agent it meets);
- the format is forced, not hoped for: the generation prompt already ends in `<think>`, so a
  trained simulator always writes reasoning first; a `TagGuard` on decoding then closes reasoning
  that runs past half the token budget, forbids any tag but `</think>` inside it and any tag after
  it, and forbids stopping before the message shows a visible token;
- every output is parsed (tolerant repairs), checked for role breaks ("as an AI", offers of help,
  talk about "the user", the card's instructions said back), for empty reasoning, for leaving on the
  opening turn and for a third verbatim copy of its own message in a row, and re-sampled with a
  fresh seed when rejected, up to `max_retries`, each re-sample `retry_temperature_step` hotter
  (a small model stuck in a loop redraws the same copy at the same temperature);
- in the task environments a turn that contradicts the goal card (`simulator.consistency`) is
  re-sampled too, but it is still a user's turn: when every sample contradicts, the first is
  delivered and counted (`stats.contradictions_delivered`);
- a turn still invalid after that never reaches the agent: the session ends, with the reason in
  `UserReply.meta["end_reason"]`, counted in `stats`;
- a valid turn that did not end the dialogue by itself may still be the user's last: the folder's
  learned leave model (`simulator.leaving`, fitted on real conversations) gives P(leave) and a
  per-row seeded draw decides (`meta["left_by"] = "leave_model"`, counted in `stats`);
- when the dialogue outgrows `max_context_tokens`, the oldest exchanges are dropped (the card
  stays), exactly like the SFT windows the simulator was trained on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from mimesis_rl.envs.protocols import SessionSpec, UserReply
from mimesis_rl.models.artifact import DEFAULT_SAMPLING, ModelManifest, base_reference
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.generation import Generation, TagGuard
from mimesis_rl.models.inference.runner import ModelRunner
from mimesis_rl.models.inference.track import ChatTrack
from mimesis_rl.simulator.consistency import goal_contradictions
from mimesis_rl.simulator.format import (
    END_MARKER,
    FORMAT_VERSION,
    OPENING_CUE,
    THINK_CLOSE,
    THINK_OPEN,
    ParsedTurn,
    ParseStats,
    card_domain,
    normalise,
    parse_output,
    render_target,
    system_card,
    trim_messages,
)
from mimesis_rl.simulator.leaving import FILE as LEAVE_FILE
from mimesis_rl.simulator.leaving import LeaveModel, uniform
from mimesis_rl.simulator.roleplay import role_break

log = logging.getLogger(__name__)

CARD_STYLES = ("simulator", "prompted")
CONTRADICTS = "contradicts_goal"
REPEAT_RUN = 3  # a message this many times in a row is a loop (sim_eval's `repeat_run` measures the same)


def prompted_card(domain: str, goal: Any = None, persona: Mapping[str, Any] | None = None,
                  behaviours: Sequence[str] = ()) -> str:
    """The assistant baseline's instructions: a plain role-play prompt, no reasoning format."""
    lines = [f"You are role-playing a user who talks to an AI assistant about {domain}. "
             "Write only the user's next message."]
    if persona:
        lines.append("The user: " + "; ".join(f"{k}: {v}" for k, v in persona.items()))
    if goal is not None:
        lines.append(f"The user's goal: {goal.text}")
        if goal.slots:
            lines.append("Facts the user knows: " + "; ".join(f"{k}: {v}" for k, v in goal.slots.items()))
    lines.append(f"When the user is done, end the message with {END_MARKER}.")
    return "\n".join(lines)


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
class _Checkpoint:
    """What a turn changes in a session, to undo a turn that failed half-way."""

    messages: int
    replies: int
    ended: bool
    end_reason: str | None
    track: ChatTrack | None
    track_lengths: tuple[int, int, int, int] | None

    @classmethod
    def of(cls, session: Session) -> _Checkpoint:
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


@dataclass
class _Turn:
    """One turn being sampled: its context, and the best parse so far."""

    context: Any  # token ids (a local runner) or a `RemotePrompt` (a server's runner)
    key: str
    cache: Any = None
    parsed: ParsedTurn | None = None
    generation: Generation | None = None
    failure: str | None = None  # why the latest sample is unusable (parse error or role break)
    opening: bool = False  # answers the opening cue: nothing has been said yet, so leaving is not a turn
    recent: tuple[str, ...] = ()  # the user's own last messages (normalised): a third copy is re-sampled
    goal: Any = None  # a task environment's goal card and domain: a turn contradicting it is re-sampled
    domain: str | None = None
    fallback: tuple[ParsedTurn, Generation] | None = None  # a usable sample that only contradicted
    incoming: str = ""  # what the leave model reads besides the message: the agent's last message,
    turn_number: int = 0  # the user's turn number (0 = the opening) and the card's domain
    topic: str | None = None
    left_by_model: bool = False


class UserSimulator:
    """A language model playing the user; see the module docstring."""

    def __init__(self, runner: ModelRunner, name: str = "simulator", card_style: str = "simulator",
                 behaviours: Sequence[str] = (), max_behaviours: int = 4,
                 persona: Mapping[str, Any] | None = None, max_context_tokens: int | None = None,
                 batch_size: int = 16, manifest: ModelManifest | None = None,
                 leave_model: LeaveModel | None = None) -> None:
        """`behaviours` (pattern names) and `persona` (shown before a scenario's own persona) make one
        model into different users (the prompted panel members). `max_context_tokens` caps the
        dialogue window (default: the model's limit); `batch_size` caps rows per `generate` in the
        stateless `reply` path. `leave_model`: the learned leave decision (None: the model's own
        end marker only, as for the prompted baseline)."""
        if card_style not in CARD_STYLES:
            raise ValueError(f"card_style must be one of {CARD_STYLES}, got {card_style!r}")
        self.runner = runner
        self.name = name
        self.card_style = card_style
        self.behaviours = tuple(behaviours)
        self.max_behaviours = max_behaviours
        self.persona = dict(persona or {})
        self.batch_size = max(1, batch_size)
        self.manifest = manifest  # where it came from (None for a runner built by hand)
        self.leave_model = leave_model
        self.stats = ParseStats()
        limit = int(runner.max_context or 2048)
        self.max_context_tokens = min(limit, max_context_tokens or limit)
        # A runner on a remote server (`models.inference.remote`) takes messages and returns text;
        # everything else here (card, checks, re-sampling, leaving) is the same for both.
        self.remote = bool(getattr(runner, "remote", False))
        forced = card_style == "simulator"  # the generation prompt ends in `<think>`: reasoning first
        self.forced_think = forced
        self.think_ids: list[int] = (runner.tokenizer.encode(THINK_OPEN, add_special_tokens=False)
                                     if forced and not self.remote else [])
        if forced and not self.remote and runner.guard is None:
            runner.guard = TagGuard.for_tag(runner.tokenizer, THINK_CLOSE, stop_ids=runner.chat.stop_ids)

    @property
    def sampling(self) -> SamplingParams:
        return self.runner.sampling

    @property
    def model(self) -> Any:
        return self.runner.model

    @property
    def tokenizer(self) -> Any:
        return self.runner.tokenizer

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, source: str | Path, name: str | None = None, device: str = "auto",
             base_model: str | Path = "models/base", merge: bool = True, dtype: str | None = None,
             sampling: SamplingParams | None = None, seed: int = 0, pool: Any = None,
             max_new_tokens: int | None = None, **kwargs: Any) -> UserSimulator:
        """From a simulator folder, an MLflow URI, or `assistant` (the prompted base model).

        pool: a `ModelPool` to share base weights with other parties (rollouts: agent and user as
        two adapters over one base); without one the model is loaded alone and a LoRA adapter is
        merged (faster generation). dtype: weights' dtype (e.g. `bfloat16`); None = the device
        switch's default. sampling: overrides the folder's own decoding settings. max_new_tokens: a cap on
        a folder's token budget (a caller that bounds every user's turn).
        """
        from mimesis_rl.models.inference.remote import is_remote_spec
        from mimesis_rl.models.inference.sources import resolve_source

        if is_remote_spec(source):
            return cls.remote(str(source), name=name, sampling=sampling, seed=seed, **kwargs)
        if str(source) == "assistant":
            return cls.assistant(base_model, device=device, name=name or "assistant", dtype=dtype,
                                 sampling=sampling, seed=seed, pool=pool, **kwargs)
        resolved = resolve_source(str(source), base_model)
        manifest = simulator_manifest(str(source), resolved.manifest)
        sampling = sampling or manifest.sampling
        if max_new_tokens is not None:
            sampling = replace(sampling, max_new_tokens=min(sampling.max_new_tokens, max_new_tokens))
        runner = _runner(resolved, sampling, device, dtype, merge, seed, pool)
        leave_path = resolved.folder / LEAVE_FILE if resolved.folder is not None else None
        kwargs.setdefault("leave_model", LeaveModel.load(leave_path) if leave_path and leave_path.exists()
                          else None)
        return cls.from_manifest(runner, manifest, name=name or str(source), **kwargs)

    @classmethod
    def from_manifest(cls, runner: ModelRunner, manifest: ModelManifest, name: str,
                      **kwargs: Any) -> UserSimulator:
        """A simulator folder's user on a runner built elsewhere (the pool's, or the policy's own model in
        agent training): the card style and behaviour profile its manifest records."""
        default_style = "prompted" if manifest.kind == "prompted" else "simulator"
        style = manifest.extra.get("card_style") or default_style
        return cls(runner, name=name, card_style=style, behaviours=manifest.behaviours,
                   max_behaviours=manifest.max_behaviours, manifest=manifest, **kwargs)

    @classmethod
    def remote(cls, spec: str, name: str | None = None, card_style: str = "simulator",
               sampling: SamplingParams | None = None, seed: int = 0, options: Any = None,
               **kwargs: Any) -> UserSimulator:
        """A user whose turns are generated on an OpenAI-compatible server (`openai:URL#MODEL`).

        card_style `simulator`: a served MIMESIS simulator (e.g. `mimesis export` under vLLM), its turn
        started with `<think>`; `prompted`: any instruct model told to play the user. options: a
        `RemoteOptions` (default: params.yaml `rollout.remote` in a checkout). The learned leave model
        is not on the server: `options.leave_model` names its file (or pass `leave_model`).
        """
        from mimesis_rl.models.inference.remote import RemoteRunner, project_options

        options = options or project_options()
        runner = RemoteRunner.from_spec(spec, sampling or DEFAULT_SAMPLING, seed=seed, options=options)
        if options.leave_model and card_style == "simulator":
            kwargs.setdefault("leave_model", LeaveModel.load(Path(options.leave_model)))
        return cls(runner, name=name or spec, card_style=card_style, **kwargs)

    @classmethod
    def assistant(cls, base_model: str | Path, device: str = "auto", name: str = "assistant",
                  sampling: SamplingParams | None = None, dtype: str | None = None, seed: int = 0,
                  pool: Any = None, **kwargs: Any) -> UserSimulator:
        """The base instruct model, no fine-tuning, told to play the user: the assistant-style baseline."""
        from mimesis_rl.models.inference.sources import ModelSource

        source = ModelSource(spec=str(base_model), base=Path(base_model), tokenizer=Path(base_model))
        sampling = sampling or DEFAULT_SAMPLING
        runner = _runner(source, sampling, device, dtype, True, seed, pool)
        manifest = ModelManifest(kind="prompted", base=base_reference(base_model),
                                 generation=asdict(sampling), extra={"card_style": "prompted"})
        return cls(runner, name=name, card_style="prompted", manifest=manifest, **kwargs)

    # -- the UserSide protocol -------------------------------------------------------------------

    def card(self, spec: SessionSpec) -> str:
        persona = {**self.persona, **dict(spec.persona or {})}
        behaviours = list(persona.pop("behaviours", None) or self.behaviours)
        if self.card_style == "prompted":
            return prompted_card(spec.domain, spec.goal, persona or None, behaviours)
        return system_card(spec.domain, spec.goal, persona or None, behaviours[: self.max_behaviours])

    def past_turn(self, message: str, reasoning: str | None = None, ended: bool = False) -> str:
        """One of the user's own past turns as it stands in this simulator's prompt: in the trained turn
        format (`<think>` first) for a simulator card, the bare message for the prompted baseline."""
        return render_target(reasoning, message, ended) if self.card_style == "simulator" else message

    def start(self, specs: list[SessionSpec]) -> list[Session]:
        return [Session(spec=s, messages=[{"role": "system", "content": self.card(s)}]) for s in specs]

    def opening(self, sessions: list[Session]) -> list[UserReply]:
        return self._speak(sessions, [OPENING_CUE] * len(sessions))

    def respond(self, sessions: list[Session], agent_messages: list[str]) -> list[UserReply]:
        if len(sessions) != len(agent_messages):
            raise ValueError(f"{len(sessions)} sessions but {len(agent_messages)} agent messages")
        return self._speak(sessions, agent_messages)

    def _speak(self, sessions: list[Session], incoming: Sequence[str]) -> list[UserReply]:
        """One turn for every session; a call that raises leaves every session as it was (so the
        server can retry the others without the request that broke the batch)."""
        saved = [_Checkpoint.of(s) for s in sessions]
        try:
            return self._speak_once(sessions, incoming)
        except BaseException:
            for session, checkpoint in zip(sessions, saved, strict=True):
                checkpoint.restore(session)
            raise

    def _speak_once(self, sessions: list[Session], incoming: Sequence[str]) -> list[UserReply]:
        replies: list[UserReply | None] = [None] * len(sessions)
        live: list[int] = []
        turns: list[_Turn] = []
        for i, (session, text) in enumerate(zip(sessions, incoming, strict=True)):
            if session.ended:
                meta = {"end_reason": session.end_reason or "ended", "note": "the session had ended"}
                replies[i] = UserReply(message="", ended=True, meta=meta)
                continue
            session.messages.append({"role": "user", "content": text})
            live.append(i)
            turns.append(self._session_turn(session))
        self._sample(turns)
        for i, turn in zip(live, turns, strict=True):
            replies[i] = self._commit(sessions[i], turn)
        return [r for r in replies if r is not None]

    def _session_turn(self, session: Session) -> _Turn:
        """The session's next context: its token track extended by the new message, or, when that
        no longer fits, the trimmed dialogue rendered afresh (KV cache dropped)."""
        spec = session.spec
        key = f"user:{spec.domain}:{spec.seed}:{len(session.replies)}"
        if self.remote:
            return _Turn(context=self._context(session.messages), key=key,
                         **_history(session.messages), **_checked_goal(spec))
        chat = self.runner.chat
        budget = self.max_context_tokens - self.sampling.max_new_tokens
        track = session.track
        if track is not None:
            track.add_external(chat.continuation_ids([session.messages[-1]]) + self.think_ids)
            if len(track.context) > budget:
                track = None
        if track is None:
            room = budget - len(self.think_ids)
            fitted = fit_messages(chat, session.messages, room)
            track = ChatTrack(prompt_ids=chat.prompt_ids(fitted) + self.think_ids)
        session.track = track
        return _Turn(context=track.context, key=key, cache=track.kv, **_history(session.messages),
                     **_checked_goal(spec))

    def _commit(self, session: Session, turn: _Turn) -> UserReply:
        """Record the turn in the session, or end the session when no valid turn came."""
        parsed, gen = turn.parsed, turn.generation
        if turn.failure is not None or parsed is None or gen is None:
            reason = turn.failure or "no_output"
            session.ended, session.end_reason = True, f"invalid_turn:{reason}"
            note = "the simulator produced no valid turn after re-sampling; the user left"
            reply = UserReply(message="", reasoning=parsed.reasoning if parsed else "", ended=True,
                              meta={"end_reason": session.end_reason, "note": note})
            session.replies.append(reply)
            return reply
        if session.track is not None:  # a local runner: the tokens (and KV cache) carry over
            session.track.add_generated(gen)
            if not gen.stopped:
                session.track.add_external([self.runner.chat.end_of_turn_id])
        session.messages.append({"role": "assistant",
                                 "content": self.past_turn(parsed.message, parsed.reasoning, parsed.ended)})
        meta: dict[str, Any] = {}
        if parsed.repairs:
            meta["repairs"] = list(parsed.repairs)
        if not gen.stopped:
            meta["truncated"] = True
        if turn.left_by_model:
            meta["left_by"] = "leave_model"
        reply = UserReply(message=parsed.message, reasoning=parsed.reasoning, ended=parsed.ended, meta=meta)
        session.ended = parsed.ended
        session.end_reason = "user_left" if parsed.ended else None
        session.replies.append(reply)
        return reply

    # -- sampling --------------------------------------------------------------------------------

    def _sample(self, turns: Sequence[_Turn]) -> None:
        """Generate, parse and check each turn; re-sample the unusable ones with fresh seeds.

        One continuously batched call: a turn whose reasoning never closed gets its `</think>`
        continuation, and an unusable one its re-sample (each `retry_temperature_step` hotter), in
        the slot it just freed while the other turns are still decoding."""
        retries = self.sampling.max_retries if self.sampling.do_sample else 0
        started: list[tuple[_Turn, int, Any]] = []  # per item: turn, attempt, closed head (or None)

        def item(turn: _Turn, attempt: int, head: Any = None) -> Any:
            started.append((turn, attempt, head))
            context = self._continue(turn, head) if head is not None else turn.context
            key = f"{turn.key}:{attempt}" + (":close" if head is not None else "")
            return context, key, turn.cache, self.sampling.for_attempt(attempt)

        def on_finish(index: int, gen: Generation | None) -> Any:
            turn, attempt, head = started[index]
            if head is None:
                self._check(turn, gen)
                if turn.failure == "unclosed_think" and (closed := self._closed_head(turn)) is not None:
                    return item(turn, attempt, closed)
            elif gen is not None:
                self._check(turn, self._after_head(head, gen), repair="closed_think")
            if turn.failure is not None and attempt < retries:
                return item(turn, attempt + 1)
            return None

        self.runner.stream([item(turn, 0) for turn in turns], on_finish)
        resampled = sum(1 for _, attempt, head in started if attempt and head is None)
        if resampled:
            log.info("%s: re-sampled %d unusable output(s) of %d turns", self.name, resampled, len(turns))
        for turn in turns:
            if turn.failure is not None and turn.fallback is not None:
                turn.parsed, turn.generation = turn.fallback
                turn.failure = None
                if turn.generation.cut_mid_sentence:
                    self.stats.cut_delivered += 1
                else:
                    self.stats.contradictions_delivered += 1
            self._decide_leave(turn)
            self.stats.note_turn(turn.failure)

    def _decide_leave(self, turn: _Turn) -> None:
        """The learned leave decision, for a valid turn that did not end the dialogue by itself. The
        draw depends on (runner seed, the turn's key) only: the same episode seed leaves at the same
        hazard level whichever agent the user meets."""
        parsed = turn.parsed
        if (self.leave_model is None or turn.failure is not None or parsed is None or not parsed.ok
                or parsed.ended or turn.opening):
            return
        p = self.leave_model.probability(parsed.message, turn.incoming, turn.turn_number, turn.topic)
        if uniform(self.runner.seed, turn.key, "leave") < p:
            turn.parsed, turn.left_by_model = replace(parsed, ended=True), True
            self.stats.learned_leaves += 1

    def _closed_head(self, turn: _Turn) -> Any:
        """Reasoning that never closed: its first half budget, then `</think>`, for the model to write
        the message after. The structure then holds by construction, not by luck. Tokens for a local
        runner; text for a server's (it goes in the prefill), or None where the server takes no prefill
        (the turn is then re-sampled)."""
        if self.remote:
            if not self.runner.options.prefill:
                return None
            cap = max(1, int(self.sampling.max_new_tokens // 2 * 3))  # ~ half the budget, in characters
            return _text(turn.generation)[:cap] + THINK_CLOSE
        close = self.runner.tokenizer.encode(THINK_CLOSE, add_special_tokens=False)
        stops = set(self.runner.chat.stop_ids)
        cap = max(1, self.sampling.max_new_tokens // 2)
        assert turn.generation is not None
        head = [t for t in turn.generation.token_ids if t not in stops][:cap]
        ends = set(self.runner.guard.boundary_ids) if self.runner.guard is not None else set()
        last_end = max((i for i, t in enumerate(head) if t in ends), default=None)
        if last_end is not None:  # close after the last whole sentence, not mid-word
            head = head[: last_end + 1]
        return head + close

    def _continue(self, turn: _Turn, head: Any) -> Any:
        """The context that continues `turn` after its closed head."""
        if self.remote:
            return replace(turn.context, prefill=turn.context.prefill + head)
        return turn.context + head

    def _after_head(self, head: Any, gen: Generation) -> Generation:
        """The whole turn: the closed head, then what the model wrote after it."""
        if self.remote:
            return replace(gen, text=head + _text(gen))
        return Generation(token_ids=head + gen.token_ids, logprobs=[0.0] * len(head) + gen.logprobs,
                          stopped=gen.stopped, cache=gen.cache)

    def _check(self, turn: _Turn, gen: Generation | None, repair: str | None = None) -> None:
        if gen is None:
            turn.failure = "context_full"
            return
        raw = _text(gen) if self.remote else self.runner.chat.decode(gen.token_ids)
        # A server that ignored the prefill may write the `<think>` itself.
        text = THINK_OPEN + raw if self.forced_think and not raw.lstrip().startswith(THINK_OPEN) else raw
        parsed = parse_output(text)
        if self.card_style == "prompted":  # the baseline never learned the format: no tags is normal
            parsed = replace(parsed, repairs=tuple(r for r in parsed.repairs if r != "missing_think"))
        if gen.forced_close:  # the guard closed reasoning at its budget: a repair, not a clean parse
            repair = repair or ("closed_mid_sentence" if gen.cut_mid_sentence else "closed_at_budget")
        if repair is not None:
            parsed = replace(parsed, repairs=(repair, *parsed.repairs))
        if self.forced_think and parsed.ok and not parsed.reasoning:
            # e.g. reasoning that was only the end marker or blank: every turn of a trained
            # simulator carries its private reasoning (CSD's coach reads it), so this one is re-sampled
            parsed = replace(parsed, message="", error="empty_reasoning")
        self.stats.add(parsed, text)
        turn.parsed, turn.generation, turn.failure = parsed, gen, parsed.error
        if parsed.ok and gen.cut_mid_sentence:
            # The close was forced with no sentence end in reach: the reasoning stops mid-sentence and
            # the message tends to go on with it. Re-sampled; still a user's turn, so when every
            # sample is cut, the first is delivered rather than ending the session.
            turn.failure = "closed_mid_sentence"
            turn.fallback = turn.fallback or (parsed, gen)
        elif parsed.ok:
            kind = role_break(parsed.message)
            if kind is not None:
                self.stats.note_role_break(kind, parsed.message)
                turn.failure = f"role_break:{kind}"
            elif len(turn.recent) == REPEAT_RUN - 1 and set(turn.recent) == {normalise(parsed.message)}:
                # The same message a third time in a row: a loop, not a user (agents would learn to wait
                # it out). Re-sampled; a user stuck in it after that leaves with the reason.
                self.stats.note_repeat(parsed.message)
                turn.failure = "repeated_turn"
            elif parsed.ended and turn.opening:
                # No real user opens a chat only to leave it (none of our corpora has one): an agent
                # would get a dialogue with nothing to do. Re-sampled like a rejected output.
                self.stats.note_opening_leave(parsed.message)
                turn.failure = "left_at_opening"
            elif turn.goal is not None and (slots := goal_contradictions(parsed.message, turn.goal,
                                                                         turn.domain)):
                # A value the goal card does not hold ("a rugged jacket" for a sporty one): re-sampled,
                # but unlike the failures above it is still a user's turn, so when every sample
                # contradicts, the first is delivered (and counted) rather than ending the session.
                self.stats.note_contradiction(slots, parsed.message)
                turn.failure = CONTRADICTS
                turn.fallback = turn.fallback or (parsed, gen)

    # -- stateless use (evaluation, the discriminator, the chat-completions endpoint) -------------

    def _context(self, messages: Sequence[Mapping[str, str]]) -> Any:
        """What the runner generates from: token ids locally, the trimmed messages for a server."""
        if not self.remote:
            return self.prompt_ids(messages)
        budget = self.max_context_tokens - self.sampling.max_new_tokens
        fitted = trim_messages(messages, self.runner.count_tokens, budget)
        return self.runner.prompt(fitted, THINK_OPEN if self.forced_think else "")

    def prompt_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """Token context for a role-flipped message list: trimmed to fit, ending in the forced `<think>`."""
        chat = self.runner.chat
        budget = self.max_context_tokens - self.sampling.max_new_tokens - len(self.think_ids)
        fitted = fit_messages(chat, messages, budget)
        return chat.prompt_ids(fitted)[-budget:] + self.think_ids

    def reply(self, prompts: Sequence[Sequence[Mapping[str, str]]],
              seed: int | None = None) -> list[ParsedTurn]:
        """The next user turn for each role-flipped prompt (system card first, the agent as "user",
        the simulator's own past turns as "assistant"). Unusable outputs are re-sampled; a turn still
        unusable comes back with `error` set (role breaks as `role_break:<kind>`).

        Prompts are batched by length, so a short context is not padded to a long one's width; each
        row's sample depends on (seed, the prompt) only: the same request gives the same turn whatever
        else shares its batch (the HTTP service relies on it).
        """
        turns = [_Turn(context=self._context(p), key=f"reply:{seed or 0}:{_digest(p)}", **_history(p))
                 for p in prompts]
        for rows in self._batches([t.context for t in turns]):
            self._sample([turns[i] for i in rows])
        out = []
        for turn in turns:
            parsed = turn.parsed or parse_output("")
            if turn.failure is not None and parsed.ok:  # a role break: the message is not usable
                parsed = replace(parsed, message="", error=turn.failure)
            out.append(parsed)
        return out

    def generate(self, prompts: Sequence[Sequence[Mapping[str, str]]], seed: int = 0) -> list[str]:
        """Raw completions (after the forced `<think>`), in input order; no parsing, no re-sampling."""
        contexts = [self._context(p) for p in prompts]
        out = [""] * len(contexts)
        prefix = THINK_OPEN if self.forced_think else ""
        for rows in self._batches(contexts):
            gens = self.runner.generate([contexts[i] for i in rows], [f"raw:{seed}:{i}" for i in rows])
            for i, gen in zip(rows, gens, strict=True):
                if gen is None:
                    continue
                raw = _text(gen) if self.remote else self.runner.chat.decode(gen.token_ids)
                out[i] = raw if raw.lstrip().startswith(THINK_OPEN) else prefix + raw
        return out

    def continue_raw(self, messages: Sequence[Mapping[str, str]], prefill: str = "", seed: int = 0,
                     sampling: SamplingParams | None = None) -> Generation | None:
        """One raw completion of a role-flipped prompt whose model turn starts with `prefill` (nothing
        forced beyond it, nothing parsed): what a plain engine such as vLLM returns for
        `continue_final_message`. None when the prompt leaves no room to generate."""
        chat, tokenizer = self.runner.chat, self.runner.tokenizer
        head = tokenizer.encode(prefill, add_special_tokens=False) if prefill else []
        budget = self.max_context_tokens - self.sampling.max_new_tokens - len(head)
        fitted = fit_messages(chat, messages, budget)
        context = chat.prompt_ids(fitted)[-budget:] + head
        key = f"raw:{seed}:{_digest(messages)}:{prefill}"
        return self.runner.generate([context], [key], None, sampling)[0]

    def _batches(self, contexts: Sequence[Sequence[int]]) -> Iterable[list[int]]:
        """Row indices in length-sorted chunks of `batch_size`: a short context is not padded to a
        long one's width. Results do not depend on the chunking (seeded per-row sampling)."""
        from tqdm.auto import tqdm

        order = sorted(range(len(contexts)), key=lambda i: len(contexts[i]))
        chunks = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        return tqdm(chunks, desc=f"{self.name}: generating", unit="batch", disable=len(chunks) < 4)

    @torch.inference_mode()
    def message_nll(self, prompts: Sequence[Sequence[Mapping[str, str]]], messages: Sequence[str],
                    reasonings: Sequence[str | None] = ()) -> list[tuple[float, int]]:
        """(summed negative log-likelihood, token count) of each real message given its context.

        Simulators in the `<think>` format are conditioned on the real reasoning first, so only the
        words the user actually said are scored, for trained and prompted simulators alike.
        """
        if self.remote:  # a chat-completions server does not score given text: no perplexity
            log.info("%s: perplexity needs the real turns' log-probs, which a chat server does not give; "
                     "left out", self.name)
            return [(0.0, 0)] * len(messages)
        reasonings = list(reasonings) or [None] * len(messages)
        tokenizer, model = self.runner.tokenizer, self.runner.model
        out = []
        with self.runner.weights():
            for prompt, message, reasoning in zip(prompts, messages, reasonings, strict=True):
                context = self.prompt_ids(prompt)
                context = context[: len(context) - len(self.think_ids)]
                prefix = "" if self.card_style == "prompted" else render_target(reasoning, "")
                prefix_ids = tokenizer.encode(prefix, add_special_tokens=False) if prefix else []
                target = tokenizer.encode(message, add_special_tokens=False)
                if not target:
                    out.append((0.0, 0))
                    continue
                ids = torch.tensor([context + prefix_ids + target], device=model.device)
                logits = model(input_ids=ids).logits[0, :-1].float()
                labels = ids[0, 1:]
                nll = torch.nn.functional.cross_entropy(logits, labels, reduction="none")[-len(target):]
                out.append((float(nll.sum()), len(target)))
        return out


def fit_messages(chat: Any, messages: Sequence[Mapping[str, str]], budget: int) -> list[dict[str, str]]:
    """The dialogue that fits `budget` tokens under `chat`'s template with its generation prompt: the
    oldest exchanges dropped, the card kept. How the runtime fits every local prompt (and sim_rl its
    GRPO prompts, so GRPO trains the turns inference samples)."""
    return trim_messages(messages, lambda m: len(chat.prompt_ids(m)), budget)


def prompt_text(chat: Any, messages: Sequence[Mapping[str, str]]) -> str:
    """The text of a trained simulator's generation prompt: the chat template with its generation
    prompt, then the forced `<think>` (`UserSimulator.prompt_ids` as text, for trainers that take
    text prompts)."""
    return chat.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True,
                                              tokenize=False) + THINK_OPEN


def simulator_manifest(source: str, manifest: ModelManifest | None) -> ModelManifest:
    """The manifest of a simulator folder this code can run: role `simulator`, and (trained ones) the turn
    format this code speaks. Every loader of a simulator folder checks through here."""
    if manifest is None or manifest.role != "simulator":
        raise ValueError(f"{source}: not a simulator folder (no mimesis.json with role `simulator`)")
    version = manifest.format.get("version")
    if manifest.kind != "prompted" and version != FORMAT_VERSION:
        raise ValueError(f"{source}: turn format {version!r}, this code speaks {FORMAT_VERSION!r} "
                         "(retrain it with `mimesis stage sim_sft`)")
    return manifest


def _text(gen: Any) -> str:
    """A remote generation's text (`RemoteGeneration.text`)."""
    return str(getattr(gen, "text", "") or "")


def _checked_goal(spec: SessionSpec) -> dict[str, Any]:
    """The goal card to check turns against: only a task environment's (chit-chat has no slot values)."""
    from mimesis_rl.envs.registry import DOMAINS

    if spec.domain not in DOMAINS or not spec.goal.slots:
        return {}
    return {"goal": spec.goal, "domain": spec.domain}


def _history(messages: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """What the re-sampling rules and the leave model read off the role-flipped dialogue so far:
    whether the turn answers the opening cue, the simulator's own last `REPEAT_RUN - 1` messages
    ("assistant"), normalised, the agent's last message, the user's turn number and the card's domain."""
    own = [m["content"] for m in messages if m.get("role") == "assistant"]
    last = messages[-1].get("content", "") if messages else ""
    card = messages[0].get("content", "") if messages and messages[0].get("role") == "system" else ""
    return {"opening": last == OPENING_CUE,
            "recent": tuple(normalise(parse_output(text).message) for text in own[-(REPEAT_RUN - 1):]),
            "incoming": last, "turn_number": len(own), "topic": card_domain(card)}


def _digest(messages: Sequence[Mapping[str, str]]) -> str:
    import hashlib
    import json

    return hashlib.blake2b(json.dumps(list(messages), sort_keys=True).encode(), digest_size=8).hexdigest()


def _runner(source: Any, sampling: SamplingParams, device: str, dtype: str | None, merge: bool, seed: int,
            pool: Any) -> ModelRunner:
    """A runner for `source`: from the shared pool, or loaded alone (LoRA merged when `merge`)."""
    if pool is not None:
        return pool.runner(source, sampling, seed=seed)
    from mimesis_rl.models.loading import load_base, load_tokenizer

    model, tokenizer = load_base(source.base, dtype=dtype, device=device, padding_side="left")
    if source.tokenizer is not None and Path(source.tokenizer).resolve() != Path(source.base).resolve():
        tokenizer = load_tokenizer(source.tokenizer, padding_side="left")
    if source.adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(source.adapter))
        if merge:
            model = model.merge_and_unload()
        model.eval()
    return ModelRunner(model, tokenizer, sampling, seed=seed)


def load_simulator(spec: str, base_model: str | Path = "models/base", sft_dir: str | Path | None = None,
                   **kwargs: Any) -> UserSimulator:
    """`assistant` | `sft-only` (needs `sft_dir`) | a folder | an MLflow URI."""
    if spec == "sft-only":
        if sft_dir is None:
            raise ValueError("the `sft-only` baseline needs the SFT simulator folder (sim_sft.output_dir)")
        return UserSimulator.load(sft_dir, name="sft-only", base_model=base_model, **kwargs)
    return UserSimulator.load(spec, base_model=base_model, **kwargs)
