"""A TRL `GRPOTrainer` `rollout_func` whose user is the served simulator.

    from mimesis_rl.serve.adapters import SimulatorClient
    from mimesis_rl.serve.adapters.trl import make_rollout_func

    client = SimulatorClient("http://127.0.0.1:8000", api_key=os.environ["MIMESIS_API_KEY"])
    rollout = make_rollout_func(client, goal_for=lambda prompt: GOALS[prompt[-1]["content"]], max_turns=4)
    trainer = GRPOTrainer(model=..., reward_funcs=..., train_dataset=..., rollout_func=rollout)

Each prompt (TRL already repeats it `num_generations` times) is one dialogue: the prompt is the
agent's own context (its system prompt; the user never sees it), the simulator opens, then the
trainer's model and the simulator alternate for up to `max_turns` agent turns or until the user
leaves. What comes back is what TRL expects: `prompt_ids` (the agent's context up to its first
turn), `completion_ids` (every later token), `logprobs` and `env_mask` (1 = the agent's sampled
tokens, 0 = the user's turns as the chat template renders them), plus `user_left`, `agent_turns`
and `user_messages` for the reward functions. The agent samples with the trainer's temperature,
top_p and top_k.

The dialogues are played by the project's rollout engine (`rollout.run_rollouts` with a
`ModelAgent`, the same path `agent_rl` trains on): the agent's turns, their log-probs and the env
mask come from there; this module adds only `ServedUser` (the server as the user side) and
`PromptDialogues`, an environment with no task whose agent context is the trainer's prompt.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import (
    EpisodeState,
    Observation,
    ParsedMessage,
    StepResult,
    TraceTurn,
    UserReply,
    Verdict,
)
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.runner import ModelRunner, derive_seed
from mimesis_rl.rollout import ModelAgent, run_rollouts
from mimesis_rl.serve.adapters.client import Goal, SimulatorClient
from mimesis_rl.serve.adapters.user import ServedUser

GoalFor = Callable[[Any], Goal | Mapping[str, Any] | str | None]
RolloutFunc = Callable[[list, Any], dict[str, list]]


def make_rollout_func(client: SimulatorClient, goal_for: GoalFor | None = None, max_turns: int = 4,
                      max_new_tokens: int = 64, concurrency: int = 16) -> RolloutFunc:
    """`rollout_func(prompts, trainer)` for GRPOTrainer; `goal_for(prompt)` gives the user's goal card
    (None = a chit-chat user). `max_new_tokens` caps each agent turn; the trainer's
    `max_completion_length` caps the whole completion."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    calls = itertools.count()

    def rollout_func(prompts: list, trainer: Any) -> dict[str, list]:
        return play(prompts, trainer, client, goal_for, max_turns, max_new_tokens, concurrency,
                    seed=next(calls))

    return rollout_func


def play(prompts: Sequence[Any], trainer: Any, client: SimulatorClient, goal_for: GoalFor | None,
         max_turns: int, max_new_tokens: int, concurrency: int = 16, seed: int = 0) -> dict[str, list]:
    """Play one dialogue per prompt on the rollout engine; see the module docstring for what comes back.
    `seed` (with the trainer's global step) keys the agent's sampling, so each call samples afresh."""
    model = trainer.model
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is not None:
        model = accelerator.unwrap_model(model)
    args = trainer.args
    cap = int(getattr(args, "max_completion_length", None) or 1 << 30)
    step = getattr(getattr(trainer, "state", None), "global_step", 0)
    runner = ModelRunner(model, trainer.processing_class, agent_sampling(args, max_new_tokens),
                         adapter=_active_adapter(model), seed=derive_seed("serve.adapters.trl", step, seed))
    agent = ModelAgent(runner, name="policy")

    def spent(episode_id: str) -> int:
        track = agent.tracks.get(episode_id)
        return len(track.completion_ids) if track is not None else 0

    goals = [Goal.coerce(goal_for(p)) if goal_for else None for p in prompts]
    env = PromptDialogues([agent_messages(p) for p in prompts], goals, max_turns, spent, cap)
    result = run_rollouts(env, agent, ServedUser(client, concurrency), range(len(prompts)), progress=False,
                          expect_action=False)
    trl = result.to_trl()
    return {
        "prompt_ids": trl["prompt_ids"],
        "completion_ids": [ids[:cap] for ids in trl["completion_ids"]],
        "logprobs": [lp[:cap] for lp in trl["logprobs"]],
        "env_mask": [mask[:cap] for mask in trl["env_mask"]],
        "user_left": [s.end_reason == "user_left" for s in result.states],
        "agent_turns": [s.agent_turns for s in result.states],
        "user_messages": [[t.content for t in s.trace if t.role == "user"] for s in result.states],
    }


def agent_sampling(args: Any, max_new_tokens: int) -> SamplingParams:
    """The agent's decoding: sampled at the trainer's temperature, top_p and top_k."""
    return SamplingParams(max_new_tokens=max_new_tokens, do_sample=True,
                          temperature=float(getattr(args, "temperature", 1.0) or 1.0),
                          top_p=float(getattr(args, "top_p", 1.0) or 1.0),
                          top_k=int(getattr(args, "top_k", 0) or 0))


def agent_messages(prompt: Any) -> list[dict[str, str]]:
    """The agent's context from a dataset prompt: a string is its system prompt, a list its messages."""
    if isinstance(prompt, str):
        return [{"role": "system", "content": prompt}]
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]


def _active_adapter(model: Any) -> str | None:
    """The adapter a PeftModel trains (its active one); None for a plain model."""
    from peft import PeftModel

    return model.active_adapter if isinstance(model, PeftModel) else None


class PromptDialogues:
    """An `Environment` with no task: dialogue i's agent context is `prompts[i]`, its user has `goals[i]`.

    The user opens; the dialogue ends when the user leaves, after `max_turns` agent turns, or once the
    agent's completion (`spent(episode_id)` tokens, the engine's record) reaches `cap`. Agent messages
    reach the user verbatim; there are no actions, and the verdict is 0 (the trainer's reward functions
    judge the dialogue).
    """

    name = "served-dialogue"
    description = "the trainer's prompts against the served simulator"

    def __init__(self, prompts: Sequence[list[dict[str, str]]], goals: Sequence[Goal | None], max_turns: int,
                 spent: Callable[[str], int], cap: int) -> None:
        self.prompts, self.goals = list(prompts), list(goals)
        self.max_turns, self.spent, self.cap = max_turns, spent, cap

    def reset(self, seed: int) -> EpisodeState:
        goal = self.goals[seed]
        system = next((m["content"] for m in self.prompts[seed] if m["role"] == "system"), "")
        return EpisodeState(episode_id=f"{self.name}-{seed}", domain=(goal.domain or "") if goal else "",
                            seed=seed, goal=GoalCard(text=goal.text if goal else ""), system_prompt=system,
                            max_turns=self.max_turns, persona=dict(goal.persona) if goal else {})

    def observe(self, state: EpisodeState) -> Observation:
        messages = [dict(m) for m in self.prompts[state.seed]]
        messages += [{"role": t.role, "content": t.content} for t in state.trace if t.role != "environment"]
        return Observation(episode_id=state.episode_id, domain=state.domain, messages=messages, public={},
                           turn=state.agent_turns + 1, turns_left=state.turns_left)

    def step(self, state: EpisodeState, agent_message: str) -> StepResult:
        state.agent_turns += 1
        meta = {"turn": state.agent_turns}
        state.trace.append(TraceTurn(role="assistant", content=agent_message, meta=meta))
        parsed = ParsedMessage(text=agent_message)
        if state.turns_left == 0 or self.spent(state.episode_id) >= self.cap:
            self._finish(state, "turn_limit")
            return StepResult(parsed=parsed, to_user=None, feedback=None, done=True)
        state.awaiting = "user"
        return StepResult(parsed=parsed, to_user=agent_message, feedback=None, done=False)

    def user_turn(self, state: EpisodeState, reply: UserReply) -> None:
        state.trace.append(TraceTurn(role="user", content=reply.message, meta=dict(reply.meta)))
        if reply.ended:
            self._finish(state, "user_left")
        else:
            state.awaiting = "agent"

    def verify(self, state: EpisodeState) -> Verdict:
        return Verdict(reward=0.0, success=False)

    def _finish(self, state: EpisodeState, reason: Any) -> None:
        state.done, state.awaiting, state.end_reason = True, "none", reason
        state.verdict = self.verify(state)
