"""The gold set: user turns in context with hand-checked pattern labels (see GUIDE.md next to it).

>>> from mimesis_rl.behavior.gold import load_gold
>>> train = load_gold(split="train")      # list[GoldItem]; corpus turns resolved from the installed corpus
"""

from mimesis_rl.behavior.gold.loader import (
    GOLD_DIR,
    GOLD_FILE,
    PASS1_FILE,
    PASS2_FILE,
    SECOND_ANNOTATOR_FILE,
    SPLITS,
    GoldError,
    GoldItem,
    gold_unavailable,
    label_matrix,
    load_gold,
    read_gold_records,
)
from mimesis_rl.behavior.gold.resolve import CorpusResolver

__all__ = [
    "GOLD_DIR",
    "GOLD_FILE",
    "PASS1_FILE",
    "PASS2_FILE",
    "SECOND_ANNOTATOR_FILE",
    "SPLITS",
    "CorpusResolver",
    "GoldError",
    "GoldItem",
    "gold_unavailable",
    "label_matrix",
    "load_gold",
    "read_gold_records",
]
