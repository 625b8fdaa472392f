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
top_p and top_k (plain `transformers.generate`; vLLM users keep their own generation and can reuse
`SimulatorClient`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.models.inference.chat import template_ids
from mimesis_rl.serve.adapters.client import Goal, SimulatorClient, UserTurn

GoalFor = Callable[[Any], Goal | Mapping[str, Any] | str | None]


@dataclass
class _Dialogue:
    messages: list[dict[str, str]]  # the agent's view: its prompt, then the dialogue
    goal: Goal | None
    start: int = 0  # where the dialogue begins in `messages` (the user's opening)
    prompt_ids: list[int] = field(default_factory=list)
    completion: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    user_messages: list[str] = field(default_factory=list)
    agent_turns: int = 0
    user_left: bool = False
    done: bool = False


RolloutFunc = Callable[[list, Any], dict[str, list]]


def make_rollout_func(client: SimulatorClient, goal_for: GoalFor | None = None, max_turns: int = 4,
                      max_new_tokens: int = 64, concurrency: int = 16) -> RolloutFunc:
    """`rollout_func(prompts, trainer)` for GRPOTrainer; `goal_for(prompt)` gives the user's goal card
    (None = a chit-chat user). `max_new_tokens` caps each agent turn; the trainer's
    `max_completion_length` caps the whole completion."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")

    def rollout_func(prompts: list, trainer: Any) -> dict[str, list]:
        return play(prompts, trainer, client, goal_for, max_turns, max_new_tokens, concurrency)

    return rollout_func


def play(prompts: Sequence[Any], trainer: Any, client: SimulatorClient, goal_for: GoalFor | None,
         max_turns: int, max_new_tokens: int, concurrency: int = 16) -> dict[str, list]:
    """Play one dialogue per prompt; see the module docstring for what comes back."""
    tok = trainer.processing_class
    model = trainer.model
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is not None:
        model = accelerator.unwrap_model(model)
    args = trainer.args
    cap = int(getattr(args, "max_completion_length", None) or 1 << 30)
    stops = _stop_ids(tok)
    dialogues = [_Dialogue(messages=_agent_messages(p), goal=Goal.coerce(goal_for(p)) if goal_for else None)
                 for p in prompts]

    with ThreadPoolExecutor(max(1, concurrency)) as pool:
        def users(todo: list[_Dialogue]) -> list[UserTurn]:
            return list(pool.map(lambda d: client.next_turn(d.messages[d.start:], d.goal), todo))

        for d, turn in zip(dialogues, users(dialogues), strict=True):  # the user opens
            d.start = len(d.messages)
            d.messages.append({"role": "user", "content": turn.message})
            d.user_messages.append(turn.message)
            d.prompt_ids = template_ids(tok, d.messages, generation_prompt=True)
        for turn_index in range(max_turns):
            active = [d for d in dialogues if not d.done]
            if not active:
                break
            generated = _generate(model, tok, [d.prompt_ids + d.completion for d in active], stops, args,
                                  max_new_tokens)
            for d, (ids, logprobs) in zip(active, generated, strict=True):
                d.completion += ids
                d.logprobs += logprobs
                d.mask += [1] * len(ids)
                d.agent_turns += 1
                d.messages.append({"role": "assistant", "content": tok.decode(ids, skip_special_tokens=True)})
                d.done = turn_index == max_turns - 1 or len(d.completion) >= cap
            asking = [d for d in active if not d.done]
            for d, turn in zip(asking, users(asking), strict=True):
                if turn.ended:
                    d.user_left = d.done = True
                    d.user_messages.append(turn.message)
                    continue
                before = list(d.messages)
                d.messages.append({"role": "user", "content": turn.message})
                d.user_messages.append(turn.message)
                env = _env_ids(tok, before, d.messages, d.completion, stops)
                d.completion += env
                d.logprobs += [0.0] * len(env)
                d.mask += [0] * len(env)
                d.done = len(d.completion) >= cap

    return {
        "prompt_ids": [d.prompt_ids for d in dialogues],
        "completion_ids": [d.completion[:cap] for d in dialogues],
        "logprobs": [d.logprobs[:cap] for d in dialogues],
        "env_mask": [d.mask[:cap] for d in dialogues],
        "user_left": [d.user_left for d in dialogues],
        "agent_turns": [d.agent_turns for d in dialogues],
        "user_messages": [d.user_messages for d in dialogues],
    }


def _agent_messages(prompt: Any) -> list[dict[str, str]]:
    if isinstance(prompt, str):
        return [{"role": "system", "content": prompt}]
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]


def _stop_ids(tok: Any) -> set[int]:
    stops = {tok.eos_token_id}
    end = tok.convert_tokens_to_ids("<|im_end|>")
    if isinstance(end, int) and end != tok.unk_token_id:
        stops.add(end)
    return {s for s in stops if s is not None}


def _env_ids(tok: Any, before: list[dict[str, str]], after: list[dict[str, str]], completion: list[int],
             stops: set[int]) -> list[int]:
    """The tokens the template puts between the agent's turn and its next generation: the end of the
    agent's turn (when the model did not write it), the user's message and the generation prompt."""
    prev = template_ids(tok, before, generation_prompt=False)
    full = template_ids(tok, after, generation_prompt=True)
    ends = [i for i, t in enumerate(prev) if t in stops]
    start = ends[-1] + 1 if ends else len(prev)
    if full[:start] != prev[:start]:  # the template re-rendered history: keep what differs
        start = next((i for i, (a, b) in enumerate(zip(prev, full, strict=False)) if a != b),
                     min(len(prev), len(full)))
    env = full[start:]
    if not completion or completion[-1] not in stops:
        env = [min(stops)] + env if stops else env
    return env


def _generate(model: Any, tok: Any, contexts: list[list[int]], stops: set[int], args: Any,
              max_new_tokens: int) -> list[tuple[list[int], list[float]]]:
    """One sampled agent turn per context (left-padded batch), with each token's log-probability under
    the trainer's temperature, cut after the first stop token."""
    import torch

    temperature = float(getattr(args, "temperature", 1.0) or 1.0)
    pad = tok.pad_token_id if tok.pad_token_id is not None else min(stops)
    width = max(len(c) for c in contexts)
    device = next(model.parameters()).device
    input_ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts], device=device)
    attention = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=max_new_tokens,
                                 do_sample=True, temperature=temperature,
                                 top_p=float(getattr(args, "top_p", 1.0) or 1.0),
                                 top_k=int(getattr(args, "top_k", 0) or 0), pad_token_id=pad,
                                 eos_token_id=sorted(stops), return_dict_in_generate=True, output_logits=True)
    finally:
        model.train(was_training)
    new = out.sequences[:, width:]
    logits = torch.stack(out.logits, dim=1).float() / temperature
    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
    results = []
    for row in range(new.shape[0]):
        ids = new[row].tolist()
        end = next((i + 1 for i, t in enumerate(ids) if t in stops), len(ids))
        results.append((ids[:end], logprobs[row, :end].tolist()))
    return results
