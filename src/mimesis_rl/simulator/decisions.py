"""Environment states where a user must decide on its card, and what the card decides there.

The simulator's measured failure is a decision, not a word: it states its budget, then never
accepts an offer at its private limit, and does not answer the question it was asked. This
module finds the states where those decisions arise, in every domain, and labels each with what
the card implies, computed by the environment's own logic on the user's side:

- *decision items*: the agent's proposal is pending (an offer at, under or over the limit, a
  booking or film that fits or misses). The expected answer is the decision of the card user,
  the scripted cooperative user with no haggling margin (`CARD_KNOBS`), replayed over the same
  agent messages: the card says "you will pay at most $R", so an offer at R is accepted.
- *question items*: the agent asks about a goal slot (the policy's own `ask_patterns` say which);
  the reply should state that slot's value (`rewards.answers` judges it).

An item is the agent's messages from a seeded episode start, so it can be replayed for any user
side: for GRPO prompts (`rl_data.decision_rows`, the card user's own replies as the context) and for
measuring a simulator (`mimesis_rl.eval.decisions.decision_accuracy`, the simulator's replies).
Support has no question items: its facts are yes/no checks whose value no word match can read.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mimesis_rl.envs.actions import action_tag, reply_accepts
from mimesis_rl.envs.protocols import EpisodeState, UserReply
from mimesis_rl.envs.scripted.knobs import Knobs, preset
from mimesis_rl.envs.scripted.user import ScriptedUser
from mimesis_rl.simulator.rewards.slots import slot_values

# The cooperative user's rule with its haggling margin off: it accepts anything within its card's
# limit (cooperative's toughness 0.2 turns down a first offer at the very maximum, as an anchor).
CARD_KNOBS: Knobs = preset("cooperative").with_(toughness=0.0, emotion=0.0)
SEED_BASE = 8_000_000  # away from evaluation seeds and from env_data's dialogue seeds
MAX_SLOT_WORDS = 4  # longer slot values (a tutoring method) cannot be judged by a mention
QUESTION_TEMPLATES = ("What's your {label}?", "Which {label} is it?", "Could you tell me your {label}?")


@dataclass(frozen=True)
class DecisionItem:
    """One state to decide in: the agent's messages of a seeded episode, the last one pending.

    kind: `at_limit` / `within` / `beyond` for proposals (accepted at the edge of the card's limit,
    accepted comfortably, turned down), `question` for a question about `asked_slots`.
    expected_accept: the card user's decision on the last message (None for a question).
    """

    domain: str
    seed: int
    agent_messages: tuple[str, ...]
    kind: str
    expected_accept: bool | None = None
    asked_slots: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"domain": self.domain, "seed": self.seed, "agent_messages": list(self.agent_messages),
                "kind": self.kind, "expected_accept": self.expected_accept,
                "asked_slots": list(self.asked_slots)}


def card_user(domain: str) -> ScriptedUser:
    """The user whose decisions are the card's (see CARD_KNOBS)."""
    from mimesis_rl.envs.registry import scripted_user

    return scripted_user(domain, knobs=CARD_KNOBS, name="card")


def replay(domain: str, seed: int, agent_messages: Sequence[str],
           user: Any = None) -> tuple[EpisodeState, UserReply | None]:
    """The episode `seed` with these agent messages and `user` (default: the card user) answering:
    the final state and the reply to the last message (None when the episode ended before it)."""
    return replay_many([DecisionItem(domain, seed, tuple(agent_messages), "replay")], user)[0]


def replay_many(items: Sequence[DecisionItem],
                user: Any = None) -> list[tuple[EpisodeState, UserReply | None]]:
    """`replay` for many items in lockstep: one `user.respond` call per round, so a learned simulator
    answers them as one batch. Items of several domains share the rounds when `user` plays any domain
    (a learned simulator); `user` defaults to the card user, which is per domain."""
    from mimesis_rl.envs.registry import make_env

    if not items:
        return []
    domains = sorted({item.domain for item in items})
    if user is None and len(domains) != 1:
        raise ValueError(f"replay_many: the card user plays one domain at a time, got {domains}")
    envs = {d: make_env(d) for d in domains}
    user = user or card_user(domains[0])
    states = [envs[item.domain].reset(item.seed) for item in items]
    sessions = user.start([s.spec for s in states])
    for item, state, reply in zip(items, states, user.opening(sessions), strict=True):
        envs[item.domain].user_turn(state, reply)
    last: list[UserReply | None] = [None] * len(items)
    for turn in range(max(len(item.agent_messages) for item in items)):
        asked = []
        for i, item in enumerate(items):
            if turn < len(item.agent_messages):
                last[i] = None
                if not states[i].done:
                    result = envs[item.domain].step(states[i], item.agent_messages[turn])
                    if result.to_user is not None:
                        asked.append((i, result.to_user))
        if asked:
            replies = user.respond([sessions[i] for i, _ in asked], [text for _, text in asked])
            for (i, _), reply in zip(asked, replies, strict=True):
                envs[items[i].domain].user_turn(states[i], reply)
                last[i] = reply
    return list(zip(states, last, strict=True))


def answerable(slots: dict[str, Any], slot: str) -> bool:
    """Can a mention show whether a reply revealed this slot? (words or numbers, not yes/no flags)"""
    forms = slot_values(slots.get(slot))
    return bool(forms) and all(len(f.split()) <= MAX_SLOT_WORDS for f in forms)


def _cue_tables() -> dict[tuple[str, str], list[dict[str, str]]]:
    """The domains' own phrasings of a slot value (what their scripted users say when they hint
    rather than name it, and what their scripted agents read back)."""
    from mimesis_rl.envs.domains import content, returns, shopping, travel

    return {("shopping", "category"): [shopping.CATEGORY_CUES], ("shopping", "style"): [shopping.STYLE_CUES],
            ("travel", "price"): [travel.PRICE_CUES], ("content", "mood"): [content.MOOD_CUES],
            ("returns", "condition"): [returns.CONDITION_TEXT, returns.REASON_TEXT]}


def answer_forms(domain: str, slots: dict[str, Any], asked: Iterable[str]) -> dict[str, list[str]]:
    """slot -> the words that state its value: the value itself, and the domain's implicit phrasing
    of it (campsite: the card's reason for the item), so a hint the environment's agent can read
    counts as an answer too (`implicit_preference` is human; a dodge is not)."""
    tables = _cue_tables()
    out = {}
    for slot in asked:
        forms = list(slot_values(slots.get(slot)))
        value = slots.get(slot)
        for table in tables.get((domain, slot), []):
            if isinstance(value, str) and value in table:
                forms.append(table[value].rstrip(".!? "))
        if domain == "campsite" and isinstance(value, str) and value in slots.get("reasons", {}):
            forms.append(slots["reasons"][value])
        out[slot] = forms
    return out


# -- proposals per domain: (value to the user, message); the card user labels each -------------

def _bargain(state: EpisodeState) -> list[tuple[float, str]]:
    limit, floor = int(state.goal.slots["reservation"]), int(state.public["floor"])
    under = max(floor, limit - max(5, round(0.15 * (limit - floor))))
    over = limit + max(5, round(0.1 * limit))
    return [(-p, f"I can do ${p}. " + action_tag("offer", price=p)) for p in sorted({limit, under, over})]


def _campsite(state: EpisodeState) -> list[tuple[float, str]]:
    from mimesis_rl.envs.domains.campsite import SPLITS, complement, points, proposal_message

    priorities = state.goal.slots["priorities"]
    return [(float(points(complement(keep), priorities)), proposal_message(keep)) for keep in SPLITS]


def _travel(state: EpisodeState) -> list[tuple[float, str]]:
    from mimesis_rl.envs.domains.travel import DAYS, booking_message, matches

    slots = state.goal.slots
    venues = state.public["venues"]
    fits = [v for v in venues if all(matches(v, slots).values())]
    misses = [v for v in venues if not all(matches(v, slots).values())]
    if not fits:
        return []
    venue, people, day = fits[0], int(slots["people"]), str(slots["day"])

    other_day = DAYS[(DAYS.index(day) + 1) % len(DAYS)]
    out = [(1.0, booking_message(venue, people, day)), (0.0, booking_message(venue, people, other_day)),
           (0.0, booking_message(venue, people % 12 + 1, day))]
    if misses:
        out.append((0.0, booking_message(misses[0], people, day)))
    return out


def _content(state: EpisodeState) -> list[tuple[float, str]]:
    from mimesis_rl.envs.domains.content import FILMS

    slots = state.goal.slots

    def suggest(f: dict[str, Any]) -> str:
        return (f"How about {f['title']} ({f['year']}), a {f['mood']} {f['genre']}? "
                + action_tag("recommend", item=f["id"]))

    fits = [f for f in FILMS if f["genre"] == slots["genre"] and f["mood"] == slots["mood"]
            and f["id"] not in slots["seen"]]
    seen = [f for f in FILMS if f["id"] in slots["seen"]]
    other = [f for f in FILMS if f["genre"] == slots["genre"] and f["mood"] != slots["mood"]]
    return [(1.0, suggest(f)) for f in fits[:1]] + [(0.0, suggest(f)) for f in (seen[:1] + other[:1])]


PROPOSALS: dict[str, Callable[[EpisodeState], list[tuple[float, str]]]] = {
    "bargain": _bargain, "campsite": _campsite, "travel": _travel, "content": _content}


def _pick(labelled: list[tuple[float, str, bool]]) -> list[tuple[str, str, bool]]:
    """At the limit (the least the card still accepts), within it (the most), beyond it (the most
    the card still turns down): the decisions that sit at the card's boundary."""
    accepted = sorted((x for x in labelled if x[2]), key=lambda x: x[0])
    rejected = sorted((x for x in labelled if not x[2]), key=lambda x: x[0])
    out = []
    if accepted:
        if accepted[-1][0] > accepted[0][0]:
            out.append(("at_limit", accepted[0][1], True))
        out.append(("within", accepted[-1][1], True))
    if rejected:
        out.append(("beyond", rejected[-1][1], False))
    return out


def _proposal_items(domain: str, seed: int, history: list[str], state: EpisodeState) -> list[DecisionItem]:
    labelled = []
    for value, message in PROPOSALS[domain](state):
        _, reply = replay(domain, seed, [*history, message])
        if reply is not None and "accept" in reply.meta:  # the card user read it as a proposal
            labelled.append((value, message, reply_accepts(reply)))
    return [DecisionItem(domain, seed, (*history, message), kind, accept)
            for kind, message, accept in _pick(labelled)]


def other_side(domain: str, seed: int, history: Sequence[str], accepted: bool) -> DecisionItem | None:
    """The proposal the card decides the other way, in place of one it accepted (`accepted`: the one
    it turns down nearest its limit) or turned down (the least it still accepts), after the same
    agent messages `history`; None in a domain without proposals or where no such proposal exists.
    Why: the scripted agents mostly propose what the card accepts, so the states a simulator reaches
    on its own teach "yes" unless each gets its counterpart."""
    from mimesis_rl.envs.registry import make_env

    if domain not in PROPOSALS:
        return None
    items = _proposal_items(domain, seed, list(history), make_env(domain).reset(seed))
    wanted = ("beyond",) if accepted else ("at_limit", "within")
    return next((item for kind in wanted for item in items if item.kind == kind), None)


def _question_items(domain: str, seed: int, history: list[str], own: str, user: ScriptedUser,
                    session: Any) -> list[DecisionItem]:
    """Questions about answerable slots (told or not: a user asked again answers again): the agent's
    own message when it asks one, and one template question per other slot that the policy's
    `ask_patterns` read as asking exactly it."""
    policy, slots = user.policy, session.slots

    def asked(message: str) -> tuple[str, ...]:
        return tuple(s for s in policy.asked_slots(session, message) if answerable(slots, s))

    out, covered = [], set()
    if asked(own):
        out.append(DecisionItem(domain, seed, (*history, own), "question", None, asked(own)))
        covered |= set(asked(own))
    for slot in policy.facts(session):
        if slot in covered or not answerable(slots, slot):
            continue
        for template in QUESTION_TEMPLATES:
            question = template.format(label=policy.label(slot))
            if asked(question) == (slot,):
                out.append(DecisionItem(domain, seed, (*history, question), "question", None, (slot,)))
                break
    return out


def decision_items(domain: str, seeds: Iterable[int]) -> list[DecisionItem]:
    """Every decision and question state of the scripted agent's dialogues with the card user: the
    questions before its first proposal, and proposals at, within and beyond the card's limit in
    place of that first proposal."""
    from mimesis_rl.envs.registry import make_env, scripted_agent

    env, agent = make_env(domain), scripted_agent(domain)
    out: list[DecisionItem] = []
    for seed in seeds:
        user = card_user(domain)
        state = env.reset(seed)
        session = user.start([state.spec])[0]
        env.user_turn(state, user.opening([session])[0])
        history: list[str] = []
        while not state.done:
            message = agent.act([env.observe(state)])[0]
            parsed = env.parse(state, message)
            if parsed.action is not None and parsed.action.kind == "propose":
                if domain in PROPOSALS:
                    out += _proposal_items(domain, seed, history, state)
                break
            # a final action asks nothing, though its JSON may hold a slot's name
            own = message if parsed.action is None and not parsed.invalid else ""
            out += _question_items(domain, seed, history, own, user, session)
            result = env.step(state, message)
            history.append(message)
            if result.to_user is not None:
                env.user_turn(state, user.respond([session], [result.to_user])[0])
    return out


def _round_robin(groups: dict[str, list[DecisionItem]], rng: random.Random) -> list[DecisionItem]:
    for group in groups.values():
        rng.shuffle(group)
    order = sorted(groups)
    rng.shuffle(order)
    out: list[DecisionItem] = []
    while any(groups[k] for k in order):
        out += [groups[k].pop() for k in order if groups[k]]
    return out


def _interleave(first: list[DecisionItem], second: list[DecisionItem]) -> list[DecisionItem]:
    mixed = [x for pair in zip(first, second, strict=False) for x in pair]
    shorter = min(len(first), len(second))
    return mixed + first[shorter:] + second[shorter:]


def balanced(items: Sequence[DecisionItem], n: int, seed: int = 0,
             reject_first: bool = False) -> list[DecisionItem]:
    """Up to `n` items, proposals and questions in turn. Proposals alternate between ones the card
    accepts (cycling at_limit / within) and ones it turns down, so neither decision is the safe
    bet; `reject_first` says which comes first (alternate it across domains when `n` is small).
    Questions cycle through the asked slots."""
    accepts: dict[str, list[DecisionItem]] = defaultdict(list)
    rejects: dict[str, list[DecisionItem]] = defaultdict(list)
    questions: dict[str, list[DecisionItem]] = defaultdict(list)
    for item in items:
        if item.kind == "question":
            questions[",".join(item.asked_slots)].append(item)
        else:
            (accepts if item.expected_accept else rejects)[item.kind].append(item)
    rng = random.Random(seed)
    yes, no = _round_robin(accepts, rng), _round_robin(rejects, rng)
    proposals = _interleave(no, yes) if reject_first else _interleave(yes, no)
    return _interleave(proposals, _round_robin(questions, rng))[:n]


def episodes_for(proposals: int, floor: int = 4) -> int:
    """Seeded episodes a domain needs for `proposals` balanced proposal items: an episode holds one
    proposal its card turns down, so half as many (at least `floor`). Too few episodes cap the items
    silently (4 episodes gave 57 of the 96 prompts that 24 a domain asked for in 4 domains)."""
    return max(floor, math.ceil(proposals / 2))


def domain_items(domains: Sequence[str] | None, per_domain: int, seed: int = 0,
                 episodes_per_domain: int = 4) -> list[DecisionItem]:
    """`per_domain` balanced items per domain (all eight when `domains` is None); domains that
    propose take turns leading with a proposal the card turns down, so accept and reject stay
    even over the domains when `per_domain` is small."""
    from mimesis_rl.envs.registry import DOMAINS

    names = list(domains) if domains is not None else list(DOMAINS)
    seeds = [SEED_BASE + seed * 10_000 + i for i in range(episodes_per_domain)]
    proposing = [name for name in names if name in PROPOSALS]
    return [item for name in names
            for item in balanced(decision_items(name, seeds), per_domain, seed,
                                 reject_first=name in proposing and proposing.index(name) % 2 == 1)]
