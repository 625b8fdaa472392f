"""How the runtime gets a usable user turn out of a model: generate, parse, check, re-sample, leave.

`TurnSampler` is `UserSimulator`'s sampling half (the runtime renders the prompts; this samples from
them). The format is forced, not hoped for, and every sample is checked:

- the generation prompt of a trained simulator already ends in `<think>`, so it always writes
  reasoning first; a `TagGuard` on decoding then closes reasoning that runs past half the token budget,
  forbids any tag but `</think>` inside it and any tag after it, and forbids stopping before the
  message shows a visible token; reasoning that never closed gets its first half budget closed with
  `</think>`, and the model writes the message after it;
- every output is parsed (tolerant repairs), checked for role breaks (`roleplay.role_break`: "as an
  AI", offers of help, talk about "the user", the card's instructions said back), for empty reasoning,
  for leaving on the opening turn and for a third verbatim copy of its own message in a row, and
  re-sampled with a fresh seed when rejected, up to `max_retries`, each re-sample
  `retry_temperature_step` hotter (a small model stuck in a loop redraws the same copy at the same
  temperature);
- in the task environments a turn that contradicts the goal card (`simulator.consistency`) is
  re-sampled too, but it is still a user's turn: when every sample contradicts, the first is delivered
  and counted (`stats.contradictions_delivered`); so is a turn whose reasoning was cut mid-sentence,
  and, for a simulator that decides by its reasoning, a turn whose message says yes where its own
  reasoning's verdict says no or the other way round (`stats.verdict_contradictions_delivered`);
- a turn still invalid after that keeps its `failure`: the runtime ends the session with the reason;
- a valid turn that did not end the dialogue by itself may still be the user's last: the folder's
  learned leave model (`simulator.leaving`, fitted on real conversations) gives P(leave) and a per-row
  seeded draw decides (counted in `stats.learned_leaves`).

Every count goes to `stats` (`simulator.turn_stats.ParseStats`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mimesis_rl.envs.actions import accept_from_text
from mimesis_rl.envs.protocols import SessionSpec
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.generation import Generation, TagGuard
from mimesis_rl.models.inference.runner import ModelRunner
from mimesis_rl.simulator.cards import card_domain
from mimesis_rl.simulator.consistency import goal_contradictions
from mimesis_rl.simulator.format import (
    OPENING_CUE,
    THINK_CLOSE,
    THINK_OPEN,
    ParsedTurn,
    normalise,
    parse_output,
)
from mimesis_rl.simulator.leaving import LeaveModel, uniform
from mimesis_rl.simulator.roleplay import role_break
from mimesis_rl.simulator.turn_stats import ParseStats
from mimesis_rl.simulator.verdicts import own_verdict

log = logging.getLogger(__name__)

CONTRADICTS = "contradicts_goal"
CONTRADICTS_VERDICT = "contradicts_own_verdict"
CUT = "closed_mid_sentence"
REPEAT_RUN = 3  # a message this many times in a row is a loop (sim_eval's `repeat_run` measures the same)


@dataclass
class PendingTurn:
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
    fallback: tuple[ParsedTurn, Generation, str] | None = None  # the first usable sample that only
    # contradicted (the card or its own verdict) or was cut mid-sentence, and which of these
    incoming: str = ""  # what the leave model reads besides the message: the agent's last message,
    turn_number: int = 0  # the user's turn number (0 = the opening) and the card's domain
    topic: str | None = None
    left_by_model: bool = False

    @classmethod
    def after(cls, messages: Sequence[Mapping[str, str]], context: Any, key: str, cache: Any = None,
              spec: SessionSpec | None = None) -> PendingTurn:
        """The turn that answers the role-flipped `messages`, with what its checks read off them; `spec`:
        a session's, whose task goal card the turn is checked against (none for a stateless prompt)."""
        goal = _checked_goal(spec) if spec is not None else {}
        return cls(context=context, key=key, cache=cache, **_history(messages), **goal)

    def still_a_turn(self, parsed: ParsedTurn, gen: Generation, failure: str) -> None:
        """Re-sample this sample, but keep the first such one to deliver if every sample fails so."""
        self.failure = failure
        self.fallback = self.fallback or (parsed, gen, failure)


class TurnSampler:
    """Samples, checks and re-samples user turns on one runner; see the module docstring.

    card_style: `simulator` (the `<think>` format is forced and required) or `prompted` (the assistant
    baseline, which never learned it). leave_model: the learned leave decision (None: the model's own end
    marker only)."""

    def __init__(self, runner: ModelRunner, name: str, card_style: str,
                 leave_model: LeaveModel | None = None, decide_by_reasoning: bool = False) -> None:
        self.runner = runner
        self.name = name
        self.card_style = card_style
        self.leave_model = leave_model
        self.decide_by_reasoning = decide_by_reasoning
        self.stats = ParseStats()
        # A runner on a remote server (`models.inference.remote`) takes messages and returns text;
        # everything else here (checks, re-sampling, leaving) is the same for both.
        self.remote = bool(getattr(runner, "remote", False))
        self.forced_think = card_style == "simulator"  # the generation prompt ends in `<think>`
        if self.forced_think and not self.remote and runner.guard is None:
            runner.guard = TagGuard.for_tag(runner.tokenizer, THINK_CLOSE, stop_ids=runner.chat.stop_ids)

    @property
    def sampling(self) -> SamplingParams:
        return self.runner.sampling

    def decode(self, gen: Any) -> str:
        """A generation's text: a server's as it came, a local one's tokens decoded."""
        return _text(gen) if self.remote else self.runner.chat.decode(gen.token_ids)

    def sample(self, turns: Sequence[PendingTurn]) -> None:
        """Generate, parse and check each turn; re-sample the unusable ones with fresh seeds.

        One continuously batched call: a turn whose reasoning never closed gets its `</think>`
        continuation, and an unusable one its re-sample (each `retry_temperature_step` hotter), in
        the slot it just freed while the other turns are still decoding."""
        retries = self.sampling.max_retries if self.sampling.do_sample else 0
        started: list[tuple[PendingTurn, int, Any]] = []  # per item: turn, attempt, closed head (or None)

        def item(turn: PendingTurn, attempt: int, head: Any = None) -> Any:
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
                turn.parsed, turn.generation, why = turn.fallback
                if why == CUT:
                    self.stats.cut_delivered += 1
                elif why == CONTRADICTS_VERDICT:
                    self.stats.verdict_contradictions_delivered += 1
                else:
                    self.stats.contradictions_delivered += 1
                turn.failure = None
            self._decide_leave(turn)
            self.stats.note_turn(turn.failure)
            if turn.failure is None:
                self.stats.note_delivered(turn.parsed)

    def _decide_leave(self, turn: PendingTurn) -> None:
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

    def _closed_head(self, turn: PendingTurn) -> Any:
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

    def _continue(self, turn: PendingTurn, head: Any) -> Any:
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

    def _check(self, turn: PendingTurn, gen: Generation | None, repair: str | None = None) -> None:
        if gen is None:
            turn.failure = "context_full"
            return
        raw = self.decode(gen)
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
            turn.still_a_turn(parsed, gen, CUT)
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
                turn.still_a_turn(parsed, gen, CONTRADICTS)
            elif self.decide_by_reasoning and _says_against_its_verdict(parsed):
                # "…, so $300 is over my limit: I'll counter." and then "Deal!": the environment reads
                # the message, so the user would close the deal its own decision turned down (2 of 3
                # such bargain replies in the fifth evidence run). Re-sampled; delivered if every
                # sample does it, like a contradiction of the card.
                self.stats.note_verdict_contradiction(parsed.message)
                turn.still_a_turn(parsed, gen, CONTRADICTS_VERDICT)


def _says_against_its_verdict(parsed: ParsedTurn) -> bool:
    """The message accepts where the reasoning's verdict declines, or declines where it accepts."""
    verdict = own_verdict(parsed.reasoning or "")
    said = accept_from_text(parsed.message or "") if verdict is not None else None
    return said is not None and said != verdict


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
