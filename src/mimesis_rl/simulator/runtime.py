"""`UserSimulator`: the one runtime that turns a language model into a user.

    sim = UserSimulator.load("models:/mimesis-simulator@candidate")   # or a folder, or "assistant"
    sessions = sim.start([SessionSpec(goal=card, domain="shopping")])
    first = sim.opening(sessions)[0]                  # UserReply(message, reasoning, ended)
    reply = sim.respond(sessions, ["What is your budget?"])[0]

Every LM user turn in the project comes from here: fidelity evaluation, the `sim_rl`
discriminator, `mimesis serve`, `mimesis sim chat`, `mimesis envs rollout` and the agent
trainers. One rule set, so the user the Fidelity Index measures is the user agents meet.

The runtime owns the prompt: the card (`simulator.cards`: `system_card` for the trained format,
`prompted_card` for the assistant baseline, with at most `max_behaviours` behaviour lines), the role-
flipped dialogue (`simulator.dialogue`), and, when the dialogue outgrows `max_context_tokens`, the oldest
exchanges dropped (the card stays), exactly like the SFT windows the simulator was trained on. Local
prompts are token tracks whose KV cache carries over from turn to turn (`simulator.session`).

Its `TurnSampler` (`simulator.sampling`) turns a prompt into a usable turn through a `ModelRunner`
(batched, per-dialogue KV reuse, seeded per-row sampling: the same episode seed gives the same user
randomness whichever agent it meets): the forced `<think>` format, parsing, the checks and re-samples,
the learned leave decision. A turn still invalid after that never reaches the agent: the session ends,
with the reason in `UserReply.meta["end_reason"]`, counted in `stats`; one the leave model ended says
so in `meta["left_by"] = "leave_model"`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from mimesis_rl.envs.protocols import SessionSpec, UserReply
from mimesis_rl.models.artifact import DEFAULT_SAMPLING, ModelManifest, base_reference
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.generation import Generation
from mimesis_rl.models.inference.runner import ModelRunner
from mimesis_rl.models.inference.track import ChatTrack
from mimesis_rl.simulator.artifact import DECIDE_BY_REASONING, simulator_manifest
from mimesis_rl.simulator.cards import prompted_card, system_card
from mimesis_rl.simulator.dialogue import trim_messages
from mimesis_rl.simulator.format import OPENING_CUE, THINK_OPEN, ParsedTurn, parse_output, render_target
from mimesis_rl.simulator.leaving import FILE as LEAVE_FILE
from mimesis_rl.simulator.leaving import LeaveModel
from mimesis_rl.simulator.sampling import PendingTurn, TurnSampler
from mimesis_rl.simulator.session import Session, SessionSnapshot
from mimesis_rl.simulator.turn_stats import ParseStats
from mimesis_rl.simulator.verdicts import turn_meta

log = logging.getLogger(__name__)

CARD_STYLES = ("simulator", "prompted")


class UserSimulator:
    """A language model playing the user; see the module docstring."""

    def __init__(self, runner: ModelRunner, name: str = "simulator", card_style: str = "simulator",
                 behaviours: Sequence[str] = (), max_behaviours: int = 4,
                 persona: Mapping[str, Any] | None = None, max_context_tokens: int | None = None,
                 batch_size: int = 16, manifest: ModelManifest | None = None,
                 leave_model: LeaveModel | None = None, decide_by_reasoning: bool = False) -> None:
        """`behaviours` (pattern names) and `persona` (shown before a scenario's own persona) make one
        model into different users (the prompted panel members). `max_context_tokens` caps the
        dialogue window (default: the model's limit); `batch_size` caps rows per `generate` in the
        stateless `reply` path. `leave_model`: the learned leave decision (None: the model's own
        end marker only, as for the prompted baseline). `decide_by_reasoning`: a reply whose message
        says neither yes nor no carries its reasoning's verdict as `meta["accept"]`
        (`verdicts.reasoned_decision`), which the environment reads like a scripted user's, and one
        whose message says the opposite of that verdict is re-sampled (`sampling.TurnSampler`)."""
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
        limit = int(runner.max_context or 2048)
        self.max_context_tokens = min(limit, max_context_tokens or limit)
        self.sampler = TurnSampler(runner, name, card_style, leave_model, decide_by_reasoning)
        # A runner on a remote server (`models.inference.remote`) takes messages and returns text;
        # everything else (card, checks, re-sampling, leaving) is the same for both.
        self.remote = self.sampler.remote
        self.forced_think = self.sampler.forced_think  # the generation prompt ends in `<think>`
        self.think_ids: list[int] = (runner.tokenizer.encode(THINK_OPEN, add_special_tokens=False)
                                     if self.forced_think and not self.remote else [])

    @property
    def sampling(self) -> SamplingParams:
        return self.runner.sampling

    @property
    def decide_by_reasoning(self) -> bool:
        """Whether the reasoning's verdict decides (the sampler checks the message against it)."""
        return self.sampler.decide_by_reasoning

    @decide_by_reasoning.setter
    def decide_by_reasoning(self, value: bool) -> None:
        self.sampler.decide_by_reasoning = bool(value)

    @property
    def stats(self) -> ParseStats:
        """The counts of every output and turn sampled (`simulator.turn_stats`)."""
        return self.sampler.stats

    @stats.setter
    def stats(self, stats: ParseStats) -> None:
        self.sampler.stats = stats

    @property
    def leave_model(self) -> LeaveModel | None:
        return self.sampler.leave_model

    @leave_model.setter
    def leave_model(self, leave_model: LeaveModel | None) -> None:
        self.sampler.leave_model = leave_model

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
        agent training): the card style, behaviour profile and decision reading its manifest records."""
        default_style = "prompted" if manifest.kind == "prompted" else "simulator"
        style = manifest.extra.get("card_style") or default_style
        kwargs.setdefault("decide_by_reasoning", bool(manifest.extra.get(DECIDE_BY_REASONING, False)))
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
        and the decision reading are not on the server: `options.leave_model` names its file and
        `options.decide_by_reasoning` says what the simulator's mimesis.json does (or pass either).
        """
        from mimesis_rl.models.inference.remote import RemoteRunner, project_options

        options = options or project_options()
        runner = RemoteRunner.from_spec(spec, sampling or DEFAULT_SAMPLING, seed=seed, options=options)
        if card_style == "simulator":
            if options.leave_model:
                kwargs.setdefault("leave_model", LeaveModel.load(Path(options.leave_model)))
            kwargs.setdefault("decide_by_reasoning", options.decide_by_reasoning)
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
        saved = [SessionSnapshot.of(s) for s in sessions]
        try:
            return self._speak_once(sessions, incoming)
        except BaseException:
            for session, checkpoint in zip(sessions, saved, strict=True):
                checkpoint.restore(session)
            raise

    def _speak_once(self, sessions: list[Session], incoming: Sequence[str]) -> list[UserReply]:
        replies: list[UserReply | None] = [None] * len(sessions)
        live: list[int] = []
        turns: list[PendingTurn] = []
        for i, (session, text) in enumerate(zip(sessions, incoming, strict=True)):
            if session.ended:
                meta = {"end_reason": session.end_reason or "ended", "note": "the session had ended"}
                replies[i] = UserReply(message="", ended=True, meta=meta)
                continue
            session.messages.append({"role": "user", "content": text})
            live.append(i)
            turns.append(self._session_turn(session))
        self.sampler.sample(turns)
        for i, turn in zip(live, turns, strict=True):
            replies[i] = self._commit(sessions[i], turn)
        return [r for r in replies if r is not None]

    def _session_turn(self, session: Session) -> PendingTurn:
        """The session's next context: its token track extended by the new message, or, when that
        no longer fits, the trimmed dialogue rendered afresh (KV cache dropped)."""
        spec = session.spec
        key = f"user:{spec.domain}:{spec.seed}:{len(session.replies)}"
        if self.remote:
            return PendingTurn.after(session.messages, self._context(session.messages), key, spec=spec)
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
        return PendingTurn.after(session.messages, track.context, key, cache=track.kv, spec=spec)

    def _commit(self, session: Session, turn: PendingTurn) -> UserReply:
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
        meta = turn_meta(parsed, self.decide_by_reasoning)
        if not gen.stopped:
            meta["truncated"] = True
        if turn.left_by_model:
            meta["left_by"] = "leave_model"
        reply = UserReply(message=parsed.message, reasoning=parsed.reasoning, ended=parsed.ended, meta=meta)
        session.ended = parsed.ended
        session.end_reason = "user_left" if parsed.ended else None
        session.replies.append(reply)
        return reply

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
        turns = [PendingTurn.after(p, self._context(p), f"reply:{seed or 0}:{_digest(p)}") for p in prompts]
        for rows in self._batches([t.context for t in turns]):
            self.sampler.sample([turns[i] for i in rows])
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
                raw = self.sampler.decode(gen)
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
