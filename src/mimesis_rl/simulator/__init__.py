"""The user simulator: turn format, SFT, RL rewards and the `UserSimulator` API.

Heavy parts (torch, transformers) load on first use, so `import mimesis_rl.simulator` stays cheap.
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.simulator.cards import system_card
from mimesis_rl.simulator.dialogue import turn_contexts
from mimesis_rl.simulator.format import END_MARKER, ParsedTurn, parse_output, render_target
from mimesis_rl.simulator.sft_data import sft_examples
from mimesis_rl.simulator.turn_stats import ParseStats

__all__ = ["END_MARKER", "ParseStats", "ParsedTurn", "UserSimulator", "parse_output", "render_target",
           "sft_examples", "system_card", "turn_contexts"]


def __getattr__(name: str) -> Any:
    if name == "UserSimulator":
        from mimesis_rl.simulator.runtime import UserSimulator

        return UserSimulator
    raise AttributeError(name)
