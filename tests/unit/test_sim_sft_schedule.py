"""The SFT training windows: only what a max_steps schedule reaches (reproducibly), environment
windows at `env.share`, windows that end the conversation at `end_share`; trainer options pass
through to TRL's config as a sub-dict (the TRL way), with clear errors."""

from __future__ import annotations

import pytest

from mimesis_rl.simulator.format import END_MARKER
from mimesis_rl.simulator.sft import SFTSettings, ends_conversation, scheduled


def _examples(n: int, ending_every: int = 0, tag: str = "c") -> list[dict]:
    out = []
    for i in range(n):
        end = f" {END_MARKER}" if ending_every and i % ending_every == 0 else ""
        out.append({"messages": [{"role": "user", "content": f"{tag}{i}"},
                                 {"role": "assistant", "content": f"<think>t</think>hi{end}"}]})
    return out


def test_scheduled_keeps_what_max_steps_reaches_and_is_seeded() -> None:
    examples = _examples(100)
    settings = SFTSettings.from_section({"max_steps": 5, "batch_size": 4, "grad_accum": 2})
    picked = scheduled(examples, settings, seed=3)
    assert len(picked) == 40 and picked == scheduled(examples, settings, seed=3)
    assert len({e["messages"][0]["content"] for e in picked}) == 40  # no repeats while the pool lasts
    assert picked != scheduled(examples, settings, seed=4)
    assert scheduled(examples, SFTSettings.from_section({"max_steps": -1}), seed=3) == examples  # epochs: all
    assert len(scheduled(examples[:10], settings, seed=3)) == 10  # fewer than needed: all


def test_environment_share_and_ending_share() -> None:
    corpus, env = _examples(200, ending_every=20), _examples(30, tag="e")
    settings = SFTSettings.from_section({"trainer": {"max_steps": 25, "per_device_train_batch_size": 4},
                                         "env": {"share": 0.3}, "end_share": 0.5})
    picked = scheduled(corpus, settings, seed=0, env_examples=env)
    assert len(picked) == 100
    from_env = [e for e in picked if e["messages"][0]["content"].startswith("e")]
    assert len(from_env) == 30
    from_corpus = [e for e in picked if e not in from_env]
    assert sum(ends_conversation(e) for e in from_corpus) == 35  # half of the 70 corpus windows
    # without env windows the share does not apply; without end_share the corpus comes as it is
    plain = SFTSettings.from_section({"trainer": {"max_steps": 25, "per_device_train_batch_size": 4}})
    assert sum(ends_conversation(e) for e in scheduled(corpus, plain, seed=0)) < 35


def test_trainer_options_pass_through_with_aliases_and_errors() -> None:
    s = SFTSettings.from_section({"max_steps": 7, "batch_size": 2, "trainer": {"learning_rate": 1e-3,
                                                                               "optim": "adamw_torch"}})
    assert s.trainer["max_steps"] == 7 and s.max_steps == 7
    assert s.trainer["per_device_train_batch_size"] == 2 and s.trainer["optim"] == "adamw_torch"
    assert s.trainer["lr_scheduler_type"] == "cosine"  # the stage's default stays
    assert SFTSettings.from_section(s.to_json()) == s  # the accelerate worker's round trip
    with pytest.raises(ValueError, match=r"sim_sft.trainer.*no_such_option"):
        SFTSettings.from_section({"trainer": {"no_such_option": 1}})
    with pytest.raises(ValueError, match=r"set by the stage"):
        SFTSettings.from_section({"trainer": {"output_dir": "x"}})
    with pytest.raises(ValueError, match=r"unknown key"):
        SFTSettings.from_section({"not_a_setting": 1})
    with pytest.raises(ValueError, match=r"env.share"):
        SFTSettings.from_section({"env": {"share": 1.5}})
