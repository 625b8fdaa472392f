"""CSD splicing, the shuffled control, settings and the estimator, on written token lists (no model)."""

from __future__ import annotations

import pytest
import torch

from mimesis_rl.agent.csd.settings import CSDSettings
from mimesis_rl.agent.csd.splice import shuffled_notes, splice_notes
from mimesis_rl.agent.csd.term import sampled_token_term

H = [90, 91]  # the assistant header (generation prompt)
EOT = 99


def _written():
    """system/user prompt ending in the header; agent turn 1, a user message + header, agent turn 2."""
    prompt = [1, 2, 3, *H]
    completion = [10, 11, EOT, 50, 51, 52, *H, 20, 21, 22, EOT]
    mask = [1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    spans = [[0, 3], [8, 12]]
    return prompt, completion, mask, spans


def test_notes_go_before_each_header_and_agent_tokens_stay_identical():
    prompt, completion, mask, spans = _written()
    row = splice_notes(prompt, completion, mask, spans, [[70, 71, 72], [80]], H)
    assert row.teacher_ids == [1, 2, 3, 70, 71, 72, *H, 10, 11, EOT, 50, 51, 52, 80, *H, 20, 21, 22, EOT]
    student = prompt + completion
    agent = [t for t, m in zip(completion, mask, strict=True) if m]
    assert [row.teacher_ids[p] for p in row.teacher_pos] == agent
    assert [student[p] for p in row.student_pos] == agent
    assert row.completion_idx == [0, 1, 2, 8, 9, 10, 11]
    assert row.note_tokens == 4
    assert [t for j, t in enumerate(row.teacher_ids) if j not in set(row.note_positions)] == student
    # The token before each agent token is the same in both sequences (the header's last token or the
    # agent's own previous token), so the teacher predicts the same position the student does.
    assert [row.teacher_ids[p - 1] for p in row.teacher_pos] == [student[p - 1] for p in row.student_pos]


def test_empty_notes_give_the_student_sequence():
    prompt, completion, mask, spans = _written()
    row = splice_notes(prompt, completion, mask, spans, [[], []], H)
    assert row.teacher_ids == prompt + completion
    assert row.teacher_pos == row.student_pos and row.note_tokens == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p, c, m, s: (p, c, m, [[1, 3], [8, 12]]), "not preceded by the assistant header"),
        (lambda p, c, m, s: (p, c, [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1], s), "outside every turn span"),
        (lambda p, c, m, s: (p, c, [1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1], s), "env_mask 0"),
        (lambda p, c, m, s: (p, c, m, [[8, 12], [0, 3]]), "out of order"),
        (lambda p, c, m, s: (p, c, m[:-1], s), "env_mask has 11 entries"),
    ],
)
def test_bad_rows_are_refused_with_the_reason(change, message):
    prompt, completion, mask, spans = change(*_written())
    with pytest.raises(ValueError, match=message):
        splice_notes(prompt, completion, mask, spans, [[70], [80]], H, where="episode 'x#0'")


def test_note_count_must_match_turns():
    prompt, completion, mask, spans = _written()
    with pytest.raises(ValueError, match="1 notes for 2 agent turns"):
        splice_notes(prompt, completion, mask, spans, [[70]], H)


def test_shuffled_notes_come_from_another_episode_seed():
    notes = [["a1", "a2"], ["b1", "b2"], ["c1"], ["d1", "d2", "d3"]]
    ids = ["bargain-1#0", "bargain-1#1", "bargain-2#0", "bargain-2#1"]
    out = shuffled_notes(notes, ids, seed=0)
    assert [len(o) for o in out] == [2, 2, 1, 3]
    for i, row in enumerate(out):
        mine = ids[i].split("#")[0]
        donors = [j for j in range(4) if ids[j].split("#")[0] != mine]
        assert any(set(row) <= set(notes[j]) for j in donors), (i, row)
    assert shuffled_notes(notes, ids, seed=0) == out  # seeded


def test_settings_from_params():
    s = CSDSettings.from_section({"enabled": True, "lambda": 0.2, "teacher": "ema"})
    assert s.lam == 0.2 and s.active and s.teacher == "ema"
    assert not CSDSettings.from_section({"enabled": True, "lam": 0.0}).active
    typo = r"params.yaml: agent_rl.csd.lamda: unknown key \(did you mean `lam`\?\)"
    with pytest.raises(ValueError, match=typo):
        CSDSettings.from_section({"lamda": 0.1})
    with pytest.raises(ValueError, match="teacher must be 'live' or 'ema'"):
        CSDSettings.from_section({"teacher": "frozen"})
    with pytest.raises(ValueError, match="form must be"):
        CSDSettings.from_section({"form": "reward"})
    with pytest.raises(ValueError, match="lam must be >= 0"):
        CSDSettings.from_section({"lam": -1})


def test_estimator_matches_trl_sampled_token_loss(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.experimental.sdpo.loss_utils import compute_sampled_token_self_distillation_loss

    torch.manual_seed(0)
    student_logits = torch.randn(2, 5, 11, requires_grad=True)
    teacher_logits = torch.randn(2, 5, 11)
    tokens = torch.randint(0, 11, (2, 5))
    ours_s = torch.log_softmax(student_logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
    ours_t = torch.log_softmax(teacher_logits, -1).gather(-1, tokens[..., None]).squeeze(-1)
    ours = sampled_token_term(ours_s, ours_t)
    theirs = compute_sampled_token_self_distillation_loss(
        student_logits, teacher_logits, tokens, distillation_alpha=1.0
    )
    assert torch.allclose(ours, theirs, atol=1e-6)
    (g_ours,) = torch.autograd.grad(ours.sum(), student_logits, retain_graph=True)
    (g_theirs,) = torch.autograd.grad(theirs.sum(), student_logits)
    assert torch.allclose(g_ours, g_theirs, atol=1e-6)


def test_ema_teacher_averages_trainable_weights_and_restores_the_live_ones():
    from mimesis_rl.agent.csd.teacher import EMATeacher

    layer = torch.nn.Linear(2, 1, bias=False)
    frozen = torch.nn.Linear(2, 1, bias=False).requires_grad_(False)
    model = torch.nn.ModuleList([layer, frozen])
    with torch.no_grad():
        layer.weight.fill_(1.0)
    ema = EMATeacher(model, rate=0.5)
    assert len(ema.params) == 1  # only trainable weights are averaged
    ema.update(step=0)
    with torch.no_grad():
        layer.weight.fill_(3.0)
    ema.update(step=1)
    ema.update(step=1)  # once per optimiser step
    with ema.swapped():
        assert torch.allclose(layer.weight, torch.full((1, 2), 2.0))
    assert torch.allclose(layer.weight, torch.full((1, 2), 3.0))
