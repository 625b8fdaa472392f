"""The runtime's counts of what it sampled: every output (clean, repaired, rejected by reason, role
breaks) and every turn (re-sampled for a repeat, a leave on the opening, a goal contradiction; delivered
anyway; failed; ended by the leave model). `UserSimulator.stats` holds one; the fidelity evaluation and
the HTTP API report it as metrics (`as_metrics`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from mimesis_rl.simulator.format import ParsedTurn, parse_output

log = logging.getLogger(__name__)

FORCED_CLOSE_REPAIRS = frozenset({"closed_at_budget", "closed_mid_sentence"})


@dataclass
class ParseStats:
    """Counts of every sampled output (clean, repaired, rejected by reason, role breaks) and of the
    turns that could not be made valid by re-sampling (`failed`, the session ends); logged as they
    happen."""

    total: int = 0
    clean: int = 0
    repaired: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    role_breaks: Counter[str] = field(default_factory=Counter)
    turns: int = 0  # turns asked for (each may take several samples)
    failed: Counter[str] = field(default_factory=Counter)  # turns still invalid after re-sampling
    opening_leaves: int = 0  # outputs that left the chat on its opening turn (re-sampled)
    repeats: int = 0  # outputs that said the user's last message a third time in a row (re-sampled)
    contradicting: int = 0  # outputs contradicting the goal card (re-sampled)
    contradictions: Counter[str] = field(default_factory=Counter)  # the same, by slot
    contradictions_delivered: int = 0  # turns where every sample contradicted (the first was delivered)
    cut_delivered: int = 0  # turns whose every sample closed its reasoning mid-sentence (first delivered)
    verdict_contradicting: int = 0  # outputs whose message said the opposite of their reasoning's verdict
    verdict_contradictions_delivered: int = 0  # turns where every sample did (the first was delivered)
    learned_leaves: int = 0  # turns the learned leave model ended (simulator.leaving)
    delivered: int = 0  # turns handed to the dialogue (valid, possibly a fallback)
    closed_at_budget: int = 0  # delivered turns whose `</think>` the guard forced (at a sentence end or not)

    def note_delivered(self, parsed: ParsedTurn | None) -> None:
        """A turn handed to the dialogue: count it when its reasoning was closed by the budget guard
        (issue 27: the share of such turns should fall as reasoning learns to close by itself)."""
        if parsed is None or not parsed.ok:
            return
        self.delivered += 1
        if set(parsed.repairs) & FORCED_CLOSE_REPAIRS:
            self.closed_at_budget += 1

    def note_contradiction(self, slots: Sequence[str], message: str) -> None:
        self.contradicting += 1
        self.contradictions.update(slots)
        log.info("simulator contradicted its card on %s (re-sampled): %r", ", ".join(slots), message[:200])

    def note_verdict_contradiction(self, message: str) -> None:
        self.verdict_contradicting += 1
        log.info("simulator's message contradicted its own verdict (re-sampled): %r", message[:200])

    def note_repeat(self, message: str) -> None:
        self.repeats += 1
        log.info("simulator repeated itself a third time (re-sampled): %r", message[:200])

    def note_opening_leave(self, message: str) -> None:
        self.opening_leaves += 1
        log.info("simulator left on the opening turn (re-sampled): %r", message[:200])

    def note_role_break(self, kind: str, message: str) -> None:
        self.role_breaks[kind] += 1
        log.info("simulator broke the user role (%s): %r", kind, message[:200])

    def note_turn(self, failure: str | None) -> None:
        self.turns += 1
        if failure is not None:
            self.failed[failure] += 1

    def add(self, parsed: ParsedTurn, raw: str = "") -> ParsedTurn:
        self.total += 1
        if parsed.error is not None:
            self.rejected[parsed.error] += 1
            log.warning("simulator output rejected (%s): %r", parsed.error, raw[:200])
        elif parsed.repairs:
            for reason in parsed.repairs:
                self.repaired[reason] += 1
            log.debug("simulator output repaired (%s): %r", ", ".join(parsed.repairs), raw[:200])
        else:
            self.clean += 1
        return parsed

    def parse(self, raw: str) -> ParsedTurn:
        return self.add(parse_output(raw), raw)

    def as_metrics(self, prefix: str = "parse") -> dict[str, float]:
        n = max(self.total, 1)
        out = {f"{prefix}.total": float(self.total), f"{prefix}.clean_rate": self.clean / n,
               f"{prefix}.rejected_rate": sum(self.rejected.values()) / n,
               f"{prefix}.repaired_rate": (self.total - self.clean - sum(self.rejected.values())) / n}
        out.update({f"{prefix}.rejected.{k}": float(v) for k, v in self.rejected.items()})
        out.update({f"{prefix}.repaired.{k}": float(v) for k, v in self.repaired.items()})
        out[f"{prefix}.role_break_rate"] = sum(self.role_breaks.values()) / n
        out.update({f"{prefix}.role_break.{k}": float(v) for k, v in self.role_breaks.items()})
        out[f"{prefix}.opening_leave_rate"] = self.opening_leaves / n
        out[f"{prefix}.repeat_rate"] = self.repeats / n
        out[f"{prefix}.contradiction_resample_rate"] = self.contradicting / n
        out[f"{prefix}.contradictions_delivered"] = float(self.contradictions_delivered)
        out[f"{prefix}.cut_delivered"] = float(self.cut_delivered)
        out[f"{prefix}.verdict_contradiction_resample_rate"] = self.verdict_contradicting / n
        out[f"{prefix}.verdict_contradictions_delivered"] = float(self.verdict_contradictions_delivered)
        turns = max(self.turns, 1)
        out[f"{prefix}.turns"] = float(self.turns)
        out[f"{prefix}.failed_turn_rate"] = sum(self.failed.values()) / turns
        out.update({f"{prefix}.failed.{k}": float(v) for k, v in self.failed.items()})
        out[f"{prefix}.learned_leave_rate"] = self.learned_leaves / turns
        out[f"{prefix}.delivered"] = float(self.delivered)
        out[f"{prefix}.closed_at_budget_turn_rate"] = self.closed_at_budget / max(self.delivered, 1)
        return out
