"""The contracts between an environment, the user side and the agent side.

Any object with the `UserSide` shape can play the user: a trained simulator
(`mimesis_rl.simulator.UserSimulator`), a prompted LLM, or a scripted user. Any object with the
`AgentSide` shape can play the agent: a scripted policy or a model behind the rollout engine.

One dialogue, step by step (see `mimesis_rl.envs.loop.play` for the batched version)::

    state = env.reset(seed)                       # goal card + agent system prompt
    session = user.start([state.spec])[0]
    env.user_turn(state, user.opening([session])[0])
    while not state.done:
        message = agent.act([env.observe(state)])[0]
        result = env.step(state, message)         # parse the action, maybe end the episode
        if result.to_user is not None:            # the user answers what the agent said
            env.user_turn(state, user.respond([session], [result.to_user])[0])
    state.verdict                                 # reward in [0, 1] + named sub-scores

Why the user's private reasoning is kept but hidden: coaching (CSD) and analysis read it from the
trace; `Environment.observe` builds the agent's view from messages only and never includes it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from mimesis_rl.data.schema import Conversation, GoalCard, Turn

EndReason = Literal["final_action", "accepted", "user_left", "turn_limit"]
ActionKind = Literal["final", "propose"]


@dataclass
class UserReply:
    """One user turn: what the agent sees (`message`) and what it never sees (`reasoning`).

    `patterns` names the behaviour patterns (data.schema.PATTERN_NAMES) the turn shows, when the
    user side knows them (scripted users do). `meta` carries structured side information, notably
    `meta["accept"]` (True/False) as the user's answer to a proposal; when it is absent the
    environment reads acceptance from the message text.
    """

    message: str
    reasoning: str = ""
    ended: bool = False
    patterns: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class SessionSpec:
    """Everything the user side needs to start playing one dialogue."""

    goal: GoalCard
    domain: str
    persona: dict[str, Any] = field(default_factory=dict)
    seed: int = 0


@runtime_checkable
class UserSide(Protocol):
    """Batched user side: one call answers many open sessions at once."""

    name: str

    def start(self, specs: list[SessionSpec]) -> list[Any]:
        """Open one session per spec; returns opaque session handles."""
        ...

    def opening(self, sessions: list[Any]) -> list[UserReply]:
        """The user's first message in each session (the user speaks first)."""
        ...

    def respond(self, sessions: list[Any], agent_messages: list[str]) -> list[UserReply]:
        """Answer the agent's latest message in each session (verbatim, action tags included)."""
        ...


# ---------------------------------------------------------------------------------------------
# Actions


@dataclass(frozen=True)
class ActionSpec:
    """One action of a domain's grammar.

    kind `final` ends the episode at once and goes to the verifier; kind `propose` is shown to the
    user, and the episode ends with it as the outcome only if the user accepts (a deal, an offer,
    a recommendation the user takes).
    `fields` maps required field names to a JSON type name: "str", "int", "number", "bool",
    "dict", "list"; `optional` lists fields that may be left out.
    """

    type: str
    kind: ActionKind
    fields: dict[str, str] = field(default_factory=dict)
    optional: tuple[str, ...] = ()
    doc: str = ""
    example: str = ""

    def usage(self) -> str:
        fields = "".join(f', "{name}": <{kind}>' for name, kind in self.fields.items())
        return self.example or f'<action>{{"type": "{self.type}"{fields}}}</action>'


@dataclass
class Action:
    """A parsed, well-formed action (the grammar's checks passed)."""

    type: str
    args: dict[str, Any]
    kind: ActionKind
    raw: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.args}


@dataclass
class ParsedMessage:
    """An agent message split into its text for the user and at most one action.

    `error` is the feedback for an action that was attempted but is invalid; `action` is None both
    when there is no action (plain talk) and when it is invalid (then `error` is set).
    """

    text: str
    action: Action | None = None
    error: str | None = None

    @property
    def invalid(self) -> bool:
        return self.error is not None


# ---------------------------------------------------------------------------------------------
# Episode state and trace


@dataclass
class TraceTurn:
    """One entry of the per-turn trace.

    role `user` and `assistant` are the dialogue; role `environment` is feedback from the
    environment to the agent (invalid action, turn limit). `reasoning` is the user's private
    reasoning (user turns only) and is never shown to the agent.
    """

    role: Literal["user", "assistant", "environment"]
    content: str
    reasoning: str | None = None
    patterns: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    """The verifier's judgement of a finished episode: reward in [0, 1] plus named sub-scores."""

    reward: float
    success: bool
    scores: dict[str, float] = field(default_factory=dict)
    notes: str = ""


@dataclass
class EpisodeState:
    """Everything about one dialogue. The environment mutates it; callers read it.

    `public` is structured information the agent may see (catalogue, policy, deal terms): the
    same facts its system prompt states in words. `hidden` is world state only the environment,
    verifier and user side know (beyond the goal card's slots).
    """

    episode_id: str
    domain: str
    seed: int
    goal: GoalCard
    system_prompt: str
    max_turns: int
    persona: dict[str, Any] = field(default_factory=dict)
    public: dict[str, Any] = field(default_factory=dict)
    hidden: dict[str, Any] = field(default_factory=dict)
    trace: list[TraceTurn] = field(default_factory=list)
    agent_turns: int = 0
    invalid_actions: int = 0
    penalty: float = 0.0
    actions: list[dict[str, Any]] = field(default_factory=list)
    pending: Action | None = None
    final_action: Action | None = None
    accepted: bool | None = None
    awaiting: Literal["user", "agent", "none"] = "user"
    done: bool = False
    end_reason: EndReason | None = None
    verdict: Verdict | None = None

    @property
    def spec(self) -> SessionSpec:
        return SessionSpec(goal=self.goal, domain=self.domain, persona=dict(self.persona), seed=self.seed)

    @property
    def turns_left(self) -> int:
        return max(0, self.max_turns - self.agent_turns)

    def to_conversation(self, source: str = "envs") -> Conversation:
        """The dialogue in the shared data contract (for coaching, labelling, fidelity metrics).

        Environment feedback goes into the meta of the assistant turn it answers; empty messages
        become a visible placeholder flagged `meta["empty"]`, since the contract forbids empty content.
        """
        turns: list[Turn] = []
        for t in self.trace:
            if t.role == "environment":
                if turns and turns[-1].role == "assistant":
                    turns[-1].meta.setdefault("environment", []).append(t.content)
                continue
            meta = dict(t.meta)
            content = t.content
            if not content.strip():
                content, meta["empty"] = "(empty message)", True
            turns.append(
                Turn(
                    role=t.role,
                    content=content,
                    reasoning=t.reasoning,
                    patterns=list(t.patterns) if t.role == "user" else [],
                    meta=meta,
                )
            )
        if len(turns) < 2:
            raise ValueError(f"{self.episode_id}: {len(turns)} turn(s); a conversation needs at least 2")
        verdict = asdict(self.verdict) if self.verdict else None
        return Conversation(
            conversation_id=self.episode_id,
            source=source,
            domain=self.domain,
            persona=self.persona or None,
            goal=self.goal,
            outcome={
                "end_reason": self.end_reason,
                "verdict": verdict,
                "final_action": self.final_action.to_dict() if self.final_action else None,
            },
            turns=turns,
        )

    def to_record(self, **extra: Any) -> dict[str, Any]:
        """A JSON-ready transcript record (one line of a transcripts JSONL file)."""
        verdict = asdict(self.verdict) if self.verdict else None
        return {
            "episode_id": self.episode_id,
            "domain": self.domain,
            "seed": self.seed,
            **extra,
            "goal": self.goal.model_dump(),
            "persona": self.persona,
            "system_prompt": self.system_prompt,
            "turns": [asdict(t) for t in self.trace],
            "agent_turns": self.agent_turns,
            "max_turns": self.max_turns,
            "invalid_actions": self.invalid_actions,
            "penalty": round(self.penalty, 6),
            "actions": self.actions,
            "final_action": self.final_action.to_dict() if self.final_action else None,
            "accepted": self.accepted,
            "end_reason": self.end_reason,
            "verdict": verdict,
            "reward": verdict["reward"] if verdict else None,
            "success": verdict["success"] if verdict else None,
        }


@dataclass
class Observation:
    """The agent's view of one dialogue: chat messages plus the public facts, no user reasoning.

    `messages` is ready for a chat template: a system message, then strictly alternating
    user/assistant messages ending with a user-role message (environment feedback is rendered as
    a user-role message starting with "[environment]").
    """

    episode_id: str
    domain: str
    messages: list[dict[str, str]]
    public: dict[str, Any]
    turn: int
    turns_left: int


@dataclass
class StepResult:
    """What one agent message did.

    `to_user` is the text the user side must answer next (None when the user does not get a turn:
    invalid action, final action, episode over). `feedback` is environment feedback shown to the
    agent in its next observation (invalid action).
    """

    parsed: ParsedMessage
    to_user: str | None
    feedback: str | None
    done: bool


@runtime_checkable
class Environment(Protocol):
    """A task domain: seeded goals, the agent's action grammar, a verifier and a turn limit.

    Termination: a valid `final` action; a user's acceptance of a `propose` action; the user
    leaving (`UserReply.ended`); or `max_turns` agent turns. An invalid action costs a turn and
    `invalid_penalty` from the reward, and never raises.
    """

    name: str
    description: str
    max_turns: int

    def reset(self, seed: int) -> EpisodeState:
        """A fresh episode: goal card (for the user side) and system prompt (for the agent)."""
        ...

    def observe(self, state: EpisodeState) -> Observation:
        """The agent's view (messages without the user's reasoning)."""
        ...

    def step(self, state: EpisodeState, agent_message: str) -> StepResult:
        """Record and parse one agent message; may end the episode."""
        ...

    def user_turn(self, state: EpisodeState, reply: UserReply) -> None:
        """Record one user reply (reasoning kept in the trace); may end the episode."""
        ...

    def verify(self, state: EpisodeState) -> Verdict:
        """Reward in [0, 1] and named sub-scores for the (finished) episode."""
        ...


@runtime_checkable
class AgentSide(Protocol):
    """Batched agent side: one call writes the next message of many dialogues at once."""

    name: str

    def act(self, observations: list[Observation]) -> list[str]:
        """One message per observation, in order (may contain one `<action>…</action>`)."""
        ...
