"""MIMESIS: realistic user simulators learned from real conversations, used as RL environments."""

__version__ = "0.1.0"
