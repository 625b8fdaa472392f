"""Corpus adapters, one module per format, looked up by name.

>>> from mimesis_rl.data.adapters import get_adapter
>>> items = get_adapter("chitchat").read("embedded")   # Conversation or BadRecord, lazily
"""

from __future__ import annotations

from mimesis_rl.data.adapters import casino, chitchat, messages
from mimesis_rl.data.adapters.base import EMBEDDED, Adapter, Excluded, Item
from mimesis_rl.data.jsonl import DataError

ADAPTERS: dict[str, Adapter] = {
    module.ADAPTER.name: module.ADAPTER for module in (chitchat, casino, messages)
}


def known_adapters() -> list[str]:
    return sorted(ADAPTERS)


def get_adapter(name: str) -> Adapter:
    """The adapter called `name`; an unknown name raises DataError listing the known ones."""
    try:
        return ADAPTERS[name]
    except KeyError:
        raise DataError(f"unknown adapter {name!r}; known adapters: {', '.join(known_adapters())}") from None


__all__ = ["ADAPTERS", "EMBEDDED", "Adapter", "Excluded", "Item", "get_adapter", "known_adapters"]
