"""The CSD term on a tiny real model: zero for equal contexts, a step moves the student toward the
teacher (loss form and per-token advantage form, same gradient), splicing keeps the agent's tokens.

The batch is what TRL hands the agent trainer's hook: left-padded prompts, right-padded completions,
`tool_mask` (= env mask), `sampling_per_token_logps` and the per-row `episodes` records.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from peft import LoraConfig, get_peft_model

from mimesis_rl.agent.coach.template import TemplateCoach
from mimesis_rl.agent.csd.driver import CSD, episodes_from_result
from mimesis_rl.agent.csd.settings import CSDSettings
from mimesis_rl.agent.csd.term import token_logps
from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import EpisodeState, SessionSpec, UserReply, Verdict
from mimesis_rl.envs.task_env import Scenario, TaskEnv
from mimesis_rl.models.loading import load_base
from mimesis_rl.models.testing import TINY_TEST_CONFIG, make_tiny_base
from mimesis_rl.rollout import ModelAgent, ModelRunner, SamplingParams, run_rollouts

pytestmark = [pytest.mark.integration]


class PriceEnv(TaskEnv):
    """The user has a hidden budget; the agent talks for two turns."""

    name = "price"
    description = "find the budget"
    max_turns = 2

    def sample(self, rng):
        budget = rng.choice([120, 340, 560])
        return Scenario(goal=GoalCard(text=f"Budget {budget}.", slots={"budget": budget}, private=["budget"]))

    def intro(self, scenario):
        return "Sell something."

    def score(self, state: EpisodeState) -> Verdict:
        return Verdict(reward=0.0, success=False)


class HidingUser:
    """Replies with private reasoning that names the budget and a withholding pattern."""

    name = "hiding-user"

    def start(self, specs: list[SessionSpec]):
        return [{"spec": s} for s in specs]

    def opening(self, sessions):
        return [
            UserReply(message="hi, I need a desk", reasoning="I have a budget but keep it to myself")
            for _ in sessions
        ]

    def respond(self, sessions, agent_messages):
        return [
            UserReply(
                message="hmm, not sure",
                reasoning=f"my budget is {s['spec'].goal.slots['budget']}; I'd rather not say",
                patterns=["withholding_info"],
            )
            for s in sessions
        ]


class Silent:
    """A coach with nothing to say: the teacher sees exactly the student's context."""

    name = "silent"

    def notes(self, contexts):
        return ["" for _ in contexts]


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp()) / "base"
    make_tiny_base(folder, config=dataclasses.replace(TINY_TEST_CONFIG, max_position_embeddings=1024))
    torch.manual_seed(0)
    model, tok = load_base(folder, dtype=torch.float32, device="cpu")
    lora = LoraConfig(
        r=4,
        lora_alpha=64,
        target_modules=["q_proj", "v_proj", "o_proj"],
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora, adapter_name="default"), tok


def _batch(model, tok):
    """Two dialogues through the rollout engine, as TRL's padded batch + the episode records."""
    runner = ModelRunner(
        model, tok, SamplingParams(max_new_tokens=6, do_sample=True), adapter="default", seed=3
    )
    result = run_rollouts(PriceEnv(), ModelAgent(runner), HidingUser(), [1, 2], progress=False)
    trl, episodes = result.to_trl(), episodes_from_result(result)
    width_p = max(len(p) for p in trl["prompt_ids"])
    width_c = max(len(c) for c in trl["completion_ids"])
    pad = tok.pad_token_id
    prompt = torch.tensor([[pad] * (width_p - len(p)) + p for p in trl["prompt_ids"]])
    pmask = torch.tensor([[0] * (width_p - len(p)) + [1] * len(p) for p in trl["prompt_ids"]])
    comp = torch.tensor([c + [pad] * (width_c - len(c)) for c in trl["completion_ids"]])
    cmask = torch.tensor([[1] * len(c) + [0] * (width_c - len(c)) for c in trl["completion_ids"]])
    tmask = torch.tensor([m + [1] * (width_c - len(m)) for m in trl["env_mask"]])
    logps = torch.tensor([lp + [0.0] * (width_c - len(lp)) for lp in trl["logprobs"]])
    return {
        "prompt_ids": prompt,
        "prompt_mask": pmask,
        "completion_ids": comp,
        "completion_mask": cmask,
        "tool_mask": tmask,
        "sampling_per_token_logps": logps,
        "advantages": torch.zeros(2),
        "episodes": episodes,
    }, trl


def test_splicing_keeps_agent_tokens_per_row(tiny):
    model, tok = tiny
    inputs, trl = _batch(model, tok)
    csd = CSD(CSDSettings(enabled=True, lam=1.0), tok, TemplateCoach())
    prompts, completions, masks = csd._rows_from(inputs)
    prepared = csd.prepare(inputs["episodes"], prompts, completions, masks)
    assert all(r is not None for r in prepared.rows)
    for i, row in enumerate(prepared.rows):
        student = trl["prompt_ids"][i] + trl["completion_ids"][i]
        agent = [t for t, m in zip(trl["completion_ids"][i], trl["env_mask"][i], strict=True) if m]
        assert [row.teacher_ids[p] for p in row.teacher_pos] == agent, f"row {i}: agent tokens changed"
        assert [student[p] for p in row.student_pos] == agent
        assert row.note_tokens > 0 and len(row.teacher_ids) == len(student) + row.note_tokens
        # Dropping the inserted positions gives the student sequence back, token for token.
        inserted = set(row.note_positions)
        assert [t for j, t in enumerate(row.teacher_ids) if j not in inserted] == student
        text = tok.decode(row.teacher_ids)
        assert text.count("Coach note:") == len(inputs["episodes"][i]["agent_spans"])
    notes = [n for row in csd.last_notes.values() for n in row]
    assert any("budget" in n for n in notes)
    assert prepared.metrics["csd/leak_rate"] == 0.0


def test_term_is_zero_when_contexts_are_equal(tiny):
    model, tok = tiny
    inputs, _ = _batch(model, tok)
    csd = CSD(CSDSettings(enabled=True, lam=1.0, form="loss"), tok, Silent())
    model.zero_grad()
    loss, metrics = csd.extra_loss(model, inputs)
    loss.backward()
    assert loss.item() == 0.0
    assert metrics["csd/reverse_kl"] == 0.0 and metrics["csd/abs_logp_gap"] == 0.0
    grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
    assert grads and all(torch.count_nonzero(g) == 0 for g in grads)
    # The advantage form adds exactly nothing when the student log-probs are the recomputed ones.
    prompts, completions, masks = csd._rows_from(inputs)
    prepared = csd.prepare(inputs["episodes"], prompts, completions, masks)
    with torch.no_grad():
        student = token_logps(
            model,
            [p + c for p, c in zip(prompts, completions, strict=True)],
            [r.student_pos for r in prepared.rows],
        )
    for i, (row, s) in enumerate(zip(prepared.rows, student, strict=True)):
        inputs["sampling_per_token_logps"][i, row.completion_idx] = s
    csd.advantages(model, inputs)
    assert torch.count_nonzero(inputs["advantages"]) == 0


def _grad_and_gap(model, tok, form: str, lr: float):
    torch.manual_seed(0)
    inputs, _ = _batch(model, tok)
    csd = CSD(CSDSettings(enabled=True, lam=1.0, form=form), tok, TemplateCoach())
    prompts, completions, masks = csd._rows_from(inputs)
    prepared = csd.prepare(inputs["episodes"], prompts, completions, masks)
    teacher = torch.cat(csd.teacher_logps(model, prepared))  # fixed target for this check
    seqs = [p + c for p, c in zip(prompts, completions, strict=True)]
    pos = [r.student_pos for r in prepared.rows]

    def gap() -> float:
        with torch.no_grad():
            return float(((torch.cat(token_logps(model, seqs, pos)) - teacher) ** 2).sum() / 2)

    params = [p for p in model.parameters() if p.requires_grad]
    saved = [p.detach().clone() for p in params]
    model.zero_grad()
    if form == "loss":
        loss, _ = csd.extra_loss(model, inputs)
    else:  # TRL's GRPO surrogate with per-token advantages, on-policy (ratio 1)
        student = token_logps(model, seqs, pos)
        for i, (row, s) in enumerate(zip(prepared.rows, student, strict=True)):
            inputs["sampling_per_token_logps"][i, row.completion_idx] = s.detach()
        csd.advantages(model, inputs)
        terms = []
        for i, (row, s) in enumerate(zip(prepared.rows, student, strict=True)):
            a = inputs["advantages"][i, row.completion_idx]
            terms.append(-(torch.exp(s - s.detach()) * a))
        loss = torch.cat(terms).mean()
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in params])
    before = gap()
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
    after = gap()
    with torch.no_grad():
        for p, s in zip(params, saved, strict=True):
            p.copy_(s)
    return grad, before, after


def test_one_step_moves_student_toward_teacher_in_both_forms(tiny):
    model, tok = tiny
    g_loss, before, after = _grad_and_gap(model, tok, "loss", lr=0.05)
    assert before > 0
    assert after < before, f"½Σ(log s - log t)² did not drop: {before} -> {after}"
    g_adv, before_a, after_a = _grad_and_gap(model, tok, "advantage", lr=0.05)
    assert after_a < before_a
    cosine = torch.nn.functional.cosine_similarity(g_loss, g_adv, dim=0)
    assert cosine > 0.999, f"advantage and loss forms disagree (cosine {cosine:.4f})"
