"""The user simulator: turn format, SFT, RL rewards and the `UserSimulator` API.

Heavy parts (torch, transformers) load on first use, so `import mimesis_rl.simulator` stays cheap.
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.simulator.format import (
    END_MARKER,
    ParsedTurn,
    ParseStats,
    parse_output,
    render_target,
    sft_examples,
    system_card,
    turn_contexts,
)

__all__ = ["END_MARKER", "ParseStats", "ParsedTurn", "UserSimulator", "parse_output", "render_target",
           "sft_examples", "system_card", "turn_contexts"]


def __getattr__(name: str) -> Any:
    if name == "UserSimulator":
        from mimesis_rl.simulator.runtime import UserSimulator

        return UserSimulator
    raise AttributeError(name)
