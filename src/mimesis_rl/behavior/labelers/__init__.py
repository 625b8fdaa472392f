"""Pattern labelers behind one interface (`Labeler.label(conversations)`): rules, embedding, llm, ensemble."""

from mimesis_rl.behavior.labelers.base import Labeler, TurnLabels
from mimesis_rl.behavior.labelers.config import BACKENDS, OFFLINE, LabelSettings
from mimesis_rl.behavior.labelers.factory import (
    FittedLabelers,
    build_labeler,
    build_labelers,
    fit_offline,
    save_fitted,
)

__all__ = [
    "BACKENDS",
    "OFFLINE",
    "FittedLabelers",
    "LabelSettings",
    "Labeler",
    "TurnLabels",
    "build_labeler",
    "build_labelers",
    "fit_offline",
    "save_fitted",
]
