"""The behaviour labeler (mimesis_rl.behavior) as the simulator's rewards and evaluation use it.

Built by `mimesis_rl.behavior.labelers.build_labeler` from params.yaml's `label` section, so the
reward and the evaluation judge turns with the labeler (and fitted artifacts) the data was
labelled with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mimesis_rl.simulator.rewards.fidelity import PatternPredictor


def load_labeler(name: str = "rules", params: Mapping[str, Any] | None = None) -> Any:
    """A `mimesis_rl.behavior` labeler by backend name (`rules`, `embedding`, `ensemble`, `llm`)."""
    from mimesis_rl.behavior.labelers import LabelSettings, build_labeler

    config = LabelSettings.from_params(params) if params else LabelSettings()
    return build_labeler(name, config)


def labeler_predictor(name: str = "rules", params: Mapping[str, Any] | None = None) -> PatternPredictor:
    """pattern -> probability of each dialogue's last (user) turn: the pattern-fidelity reward's input."""
    return load_labeler(name, params).predict_dialogues
