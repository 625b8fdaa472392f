"""The distillation term's arithmetic: log-probs at chosen positions, and the sampled-token estimator.

`token_logps` runs the output layer only where asked (agent tokens), for the student and the teacher;
`sampled_token_term` is TRL's sampled-token self-distillation estimator on log-probs already gathered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def _lm_parts(model: Any) -> tuple[Any, Any]:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    body = getattr(base, base.base_model_prefix)
    return body, base.get_output_embeddings()


def token_logps(
    model: Any,
    sequences: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int]],
    temperature: float = 1.0,
    batch_size: int = 4,
    pad_id: int = 0,
) -> list[torch.Tensor]:
    """log p(seq[i] | seq[:i]) at each position i of each row (right padding, logits only where asked).

    Only the hidden states at the asked positions go through the output layer, so a 49k vocabulary
    over long dialogues costs (tokens asked × vocab), not (sequence × vocab). Grad flows when enabled.
    """
    body, head = _lm_parts(model)
    device = next(model.parameters()).device
    out: list[torch.Tensor] = []
    for start in range(0, len(sequences), batch_size):
        seqs, pos = sequences[start : start + batch_size], positions[start : start + batch_size]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
        attn = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):
            ids[r, : len(s)] = torch.tensor(list(s), dtype=torch.long)
            attn[r, : len(s)] = 1
        hidden = body(input_ids=ids.to(device), attention_mask=attn.to(device)).last_hidden_state
        rows = torch.cat([torch.full((len(p),), r, dtype=torch.long) for r, p in enumerate(pos)])
        cols = torch.cat([torch.tensor(list(p), dtype=torch.long) for p in pos])
        if cols.numel() == 0:
            out += [hidden.new_zeros(0) for _ in pos]
            continue
        logits = head(hidden[rows.to(device), (cols - 1).to(device)]).float() / temperature
        chosen = ids[rows, cols].to(device)
        logps = torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None]).squeeze(1)
        out += list(torch.split(logps, [len(p) for p in pos]))
    return out


def sampled_token_term(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Per-token loss whose gradient is ∇ reverse-KL(s‖t) on sampled tokens: TRL's sampled-token
    estimator (`(log s - log t).detach() * log s`) on log-probs already gathered."""
    return (student - teacher).detach() * student
