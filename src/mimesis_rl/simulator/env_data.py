"""Environment dialogues as simulator training data: how a user acts on a goal card.

The corpus teaches how people talk, but never shows a user with a goal card to pursue: a simulator
trained on it alone opens a shopping task with chit-chat and never says what it wants. Here each
task environment's scripted agent plays against scripted users of the training-role presets
(`cooperative`, `train_mix`; never the evaluation panel's unseen presets) on seeded goals, and each
transcript becomes a `Conversation`: the goal card and persona the simulator will be given, the
scripted user's private reasoning (`UserReply.reasoning`) and patterns, and whether it left. SFT
turns them into role-flipped windows under the very card `UserSimulator.card` renders at inference
(half of them with a behaviour line, half without, as a learned simulator's own card has none);
GRPO takes its environment prompts from the same dialogues, at every user turn.

Seeds are drawn from a range of their own (`SEED_BASE`), away from the small seeds rollouts and
evaluations use, so training goals and evaluation goals do not coincide by construction.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.data.schema import Conversation, GoalCard, Turn
from mimesis_rl.simulator.decision_windows import SPANS, decision_kind, with_decision_share
from mimesis_rl.simulator.sft_data import sft_windows

log = logging.getLogger(__name__)

SEED_BASE = 7_000_000
BEHAVIOUR_LINE_SHARE = 0.5  # env windows whose card names the dialogue's patterns
CARD_USER = "card"  # the `outcome.preset` of a decision item's dialogue (`decision_dialogues`)


@dataclass(frozen=True)
class EnvDialogues:
    """Environment dialogues for simulator training (`sim_sft.env`, `sim_rl.env`).

    share: share of the SFT training windows taken from these dialogues (0 = none; unused by RL).
    presets: scripted-user presets; only the panel's training-role presets are allowed.
    domains: environments to play (null = all eight).
    episodes_per_domain: dialogues per (domain, preset).
    decision_share: share of the environment SFT windows that end on a decision turn (a reply to a
        pending proposal or to a question about a goal slot; `simulator.decision_windows`); 0 = windows
        end wherever the dialogue cuts them.
    decision_items: per domain, boundary states added as dialogues that end on the card user's reply
        (`simulator.decisions.domain_items`: proposals at, within and beyond the card's limit, as many
        turned down as accepted, and questions about a slot). The scripted dialogues lack that
        contrast: their agent offers what the card allows, so at the evidence settings their decision
        windows accept 65 times for 3 refusals, and a model can learn "accept" without the card.
    decision_focus: a decision item trains on its last exchange only (the card, the proposal or question,
        the card user's reply), so its loss falls on the decision alone rather than on the scripted
        turns before it; off = the item's whole dialogue, like any environment window.
    verdict_weight: in a window ending on a reply to a proposal, the tokens of its verdict count this
        many times in the SFT loss (`training.span_weights`); 1 = as any token. Why: the verdict is ~1
        of 60 trained tokens, and under the plain mean every route left it at chance.
    verdict_span: which tokens (`decision_windows.verdict_span`): `clause`, the reasoning's last "so
        ..." clause up to its colon (" so $470 is over my $427 limit"), `reply`, on through the
        delivered message, or `act`, the act a verdict-first reasoning opens with ("I'll take it").
    verdict_first: every reply to a proposal reasons act first ("I'll take it: they offer $420; I'd pay
        at most $500, so $420 is within my limit."; `decision_windows.act_first`), so the decision is
        the reply's first words rather than the end of a chain a small model loses on the way.
    onpolicy_dialogues: per domain, dialogues the warm-start simulator (`sim_sft.warm_start`) plays
        against the scripted agent on training seeds before training; each proposal and question it
        met becomes a window that ends on the card user's reply there, its own earlier turns kept as
        untrained context (`simulator.onpolicy`, DAgger: the states it reaches, the card's decision).
        0 = none.
    onpolicy_share: share of the environment windows taken from those.
    onpolicy_balanced: every relabelled proposal also comes with the one its card decides the other way
        in the agent's place (`decisions.other_side`), so half the relabelled proposals are turned
        down. Why: the scripted agents mostly propose what the card accepts, and a DAgger round on its
        own states taught an always-yes user (75/128 successes, all 64 proposals accepted; issue 27).
    """

    share: float = 0.0
    presets: list[str] = field(default_factory=lambda: ["cooperative", "train_mix"])
    domains: list[str] | None = None
    episodes_per_domain: int = 8
    decision_share: float = 0.0
    decision_items: int = 0
    decision_focus: bool = False
    verdict_weight: float = 1.0
    verdict_span: str = "clause"
    verdict_first: bool = False
    onpolicy_dialogues: int = 0
    onpolicy_share: float = 0.5
    onpolicy_balanced: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.decision_share <= 1.0:
            raise ValueError(f"env.decision_share must be in [0, 1], got {self.decision_share}")
        if not 0.0 <= self.share < 1.0:
            raise ValueError(f"env.share must be in [0, 1), got {self.share}")
        if self.decision_items < 0:
            raise ValueError(f"env.decision_items must be >= 0, got {self.decision_items}")
        if self.verdict_weight <= 0:
            raise ValueError(f"env.verdict_weight must be > 0, got {self.verdict_weight}")
        if self.verdict_span not in SPANS:
            raise ValueError(f"env.verdict_span must be one of {SPANS}, got {self.verdict_span!r}")
        if self.verdict_span == "act" and not self.verdict_first:
            raise ValueError("env.verdict_span 'act' weighs the act a verdict-first reply opens with; "
                             "set env.verdict_first: true")
        if self.onpolicy_dialogues < 0:
            raise ValueError(f"env.onpolicy_dialogues must be >= 0, got {self.onpolicy_dialogues}")
        if not 0.0 <= self.onpolicy_share <= 1.0:
            raise ValueError(f"env.onpolicy_share must be in [0, 1], got {self.onpolicy_share}")
        if self.onpolicy_balanced and not self.onpolicy_dialogues:
            raise ValueError("env.onpolicy_balanced balances relabelled decisions: "
                             "set env.onpolicy_dialogues")
        if self.onpolicy_dialogues and not self.share:
            raise ValueError("env.onpolicy_dialogues needs env.share > 0: they are environment windows")
        if self.episodes_per_domain < 0:
            raise ValueError(f"env.episodes_per_domain must be >= 0, got {self.episodes_per_domain}")


def training_presets() -> list[str]:
    """The scripted presets the simulator panel lists in its `train` role."""
    from mimesis_rl.envs.panel import Panel
    from mimesis_rl.envs.specs import split_user_spec

    out = []
    for member in Panel().by_role("train"):
        kind, body = split_user_spec(member.spec)
        if kind == "scripted":
            out.append(body)
    return out


def check_presets(presets: Sequence[str], where: str = "env.presets") -> None:
    """Refuse presets outside the training role: training on an unseen panel user would leak it."""
    allowed = training_presets()
    bad = [p for p in presets if p not in allowed]
    if bad:
        raise ValueError(f"{where}: {bad} are not training-role presets of the simulator panel "
                         f"(allowed: {allowed}); evaluation users must stay unseen")


def episode_conversation(state: Any, preset: str, keep_last: bool = False,
                         suffix: str = "") -> Conversation | None:
    """One finished episode as a Conversation (None when it has no usable user turn).

    The goal is the card the user started with (a change of mind is in the dialogue, not the card);
    environment notes are dropped; when the turn limit cut the dialogue, the user's last turn is
    dropped too, since the last user turn of a conversation counts as leaving (`keep_last`: kept, for
    a dialogue cut on purpose at the reply it was played for, and marked as not leaving). An accepted
    deal's last turn is kept and is not a leaving either: the environment closes the deal, the user
    does not walk out (`leaving.turn_cases` reads it the same way). Trained as leaving, every deal
    taught the end marker: 207 of the evidence profile's 1,084 environment windows ended on one (the
    evidence SFT model ended 4 of 32 scripted-agent dialogues by its own marker; issue 27).
    """
    original = state.hidden.get("original_goal")
    goal = GoalCard(**original) if original else state.goal
    turns: list[Turn] = []
    for t in state.trace:
        if t.role == "environment" or not t.content.strip():
            continue
        if t.role == "user":
            before = turns[-1].content if turns and turns[-1].role == "assistant" else None
            kind = decision_kind(state.domain, before, t.meta)
            turns.append(Turn(role="user", content=t.content, reasoning=t.reasoning or None,
                              patterns=list(t.patterns), meta={"decision": kind} if kind else {}))
        else:
            turns.append(Turn(role="assistant", content=t.content))
    if state.end_reason != "user_left" and turns and turns[-1].role == "user":
        if keep_last or state.end_reason == "accepted":  # the reply it was cut at (or the deal) stays,
            turns[-1].meta["ended"] = False  # and is not a leaving (it would teach leaving after every
        else:                                # counter-offer, answer and deal: `user_left`)
            turns.pop()
    if len(turns) < 2 or not any(t.role == "user" for t in turns):
        return None
    return Conversation(conversation_id=f"env-{preset}-{state.episode_id}{suffix}", source="envs",
                        domain=state.domain, persona=state.persona or None, goal=goal,
                        outcome={"end_reason": state.end_reason, "preset": preset,
                                 "success": bool(state.verdict and state.verdict.success)},
                        turns=turns)


def play_dialogues(settings: EnvDialogues, seed: int = 0) -> list[Conversation]:
    """Scripted agent vs scripted user, every (domain, preset), `episodes_per_domain` seeded goals each."""
    from mimesis_rl.envs.loop import play
    from mimesis_rl.envs.registry import DOMAINS, make_env, scripted_agent, scripted_user

    check_presets(settings.presets)
    names = list(settings.domains) if settings.domains is not None else list(DOMAINS)
    unknown = sorted(set(names) - set(DOMAINS))
    if unknown:
        raise ValueError(f"env.domains: unknown {unknown}; known: {', '.join(DOMAINS)}")
    seeds = [SEED_BASE + seed * 10_000 + i for i in range(settings.episodes_per_domain)]
    out = []
    for name in names:
        for preset in settings.presets:
            states = play(make_env(name), scripted_agent(name), scripted_user(name, preset), seeds)
            out += [c for c in (episode_conversation(s, preset) for s in states) if c is not None]
    log.info("environment dialogues: %d from %d domain(s) x %d preset(s)", len(out), len(names),
             len(settings.presets))
    if settings.decision_items:
        out += decision_dialogues(names, settings.decision_items, seed)
    return out


def decision_dialogues(domains: Sequence[str], per_domain: int, seed: int = 0) -> list[Conversation]:
    """`per_domain` boundary states per domain (`simulator.decisions.domain_items`), each replayed with
    the card user and kept up to its reply: the decision (or answer) the card implies, with the card
    user's grounded reasoning ("They offer $620; I'd pay at most $500, so $620 is over my limit")."""
    from mimesis_rl.simulator.decisions import domain_items, episodes_for, replay

    items = domain_items(domains, per_domain, seed, episodes_per_domain=episodes_for(per_domain))
    out = []
    for i, item in enumerate(items):
        state, reply = replay(item.domain, item.seed, item.agent_messages)
        conv = episode_conversation(state, CARD_USER, keep_last=True, suffix=f"-{i}") if reply else None
        if conv is not None:
            out.append(conv)
    log.info("decision dialogues: %d (%d proposals turned down)", len(out),
             sum(item.expected_accept is False for item in items))
    return out


def env_windows(conversations: Sequence[Conversation], max_behaviours: int = 4,
                window_turns: int | None = None, seed: int = 0,
                decision_share: float = 0.0, decision_focus: bool = False) -> list[dict[str, Any]]:
    """SFT windows of environment dialogues; a seeded half of the dialogues get a behaviour line;
    `decision_share` of them end on a decision turn (`decision_windows.with_decision_share`); with
    `decision_focus` a decision item is its last exchange alone (`EnvDialogues.decision_focus`)."""
    rng = random.Random(f"env-windows:{seed}")
    out = []
    for conv in conversations:
        limit = max_behaviours if rng.random() < BEHAVIOUR_LINE_SHARE else 0
        windows = sft_windows(conv, limit, window_turns)
        if decision_focus and windows and (conv.outcome or {}).get("preset") == CARD_USER:
            messages = windows[-1]["messages"]
            windows = [{**windows[-1], "messages": [messages[0], *messages[-2:]]}]
        out += windows
    return with_decision_share(out, conversations, decision_share, max_behaviours, window_turns, seed)
