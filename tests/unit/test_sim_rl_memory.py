"""benchmarks/sim_memory.py: one lever per run (trainer options, cheap rewards) without leaving it in
the project's params."""

from __future__ import annotations

from pathlib import Path

import yaml


def test_benchmark_sets_one_lever_for_one_run(tmp_path: Path) -> None:
    from benchmarks.sim_memory import set_steps

    params = {"sim_rl": {"trainer": {"max_steps": 16, "per_device_train_batch_size": 8},
                         "rewards": {"format": 1}},
              "profiles": {"demo": {"sim_rl": {"trainer": {"max_steps": 2, "per_device_train_batch_size": 2},
                                               "rewards": {"realism": 1.0}}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    set_steps(tmp_path, 1, {"per_device_train_batch_size": 4}, cheap_rewards=True)
    out = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert out["sim_rl"]["trainer"] == {"max_steps": 1, "per_device_train_batch_size": 4}
    assert out["sim_rl"]["rewards"] == {"format": 1, "realism": 0.0, "pattern_fidelity": 0.0}
    assert out["profiles"]["demo"]["sim_rl"] == {"trainer": {}}  # nothing in the profile overrides the run
