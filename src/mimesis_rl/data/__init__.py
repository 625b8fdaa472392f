"""The data plane: the conversation schema, JSONL I/O, corpus adapters and splitting."""

from mimesis_rl.data.schema import PATTERN_NAMES, Conversation, GoalCard, Turn

__all__ = ["PATTERN_NAMES", "Conversation", "GoalCard", "Turn"]
