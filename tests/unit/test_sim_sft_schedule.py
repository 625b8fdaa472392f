"""Only the SFT examples a max_steps schedule reaches are kept (and tokenized), reproducibly."""

from __future__ import annotations

from mimesis_rl.simulator.sft import SFTSettings, scheduled


def test_scheduled_keeps_what_max_steps_reaches_and_is_seeded() -> None:
    examples = [{"messages": [{"role": "user", "content": str(i)}]} for i in range(100)]
    settings = SFTSettings(max_steps=5, batch_size=4, grad_accum=2)
    picked = scheduled(examples, settings, seed=3)
    assert len(picked) == 40 and picked == scheduled(examples, settings, seed=3)
    assert picked != scheduled(examples, settings, seed=4)
    assert scheduled(examples, SFTSettings(max_steps=-1), seed=3) == examples  # epochs: everything
    assert scheduled(examples[:10], settings, seed=3) == examples[:10]  # fewer than needed: all
