"""Turn references into text: the gold set stores corpus turns as (conversation id, turn index) only.

The text comes from the corpus installed with the project (PyPI `chitchat-dataset`), read through
the project's own adapter, so the ids and turn indices are exactly those the pipeline produces.
"""

from __future__ import annotations

from collections.abc import Iterable

from mimesis_rl.data.adapters import get_adapter
from mimesis_rl.data.jsonl import DataError
from mimesis_rl.data.schema import Conversation

SUPPORTED_SOURCES = ("chitchat",)


class CorpusResolver:
    """Reads the embedded corpus once and keeps the conversations that were asked for."""

    def __init__(self) -> None:
        self._cache: dict[str, Conversation] = {}

    def fetch(self, source: str, conversation_ids: Iterable[str]) -> dict[str, Conversation]:
        """The conversations with these ids; a missing one raises DataError naming it."""
        if source not in SUPPORTED_SOURCES:
            raise DataError(f"unsupported gold source {source!r}; supported: {', '.join(SUPPORTED_SOURCES)}")
        wanted = set(conversation_ids) - set(self._cache)
        if wanted:
            for item in get_adapter(source).read("embedded"):
                if isinstance(item, Conversation) and item.conversation_id in wanted:
                    self._cache[item.conversation_id] = item
            missing = sorted(wanted - set(self._cache))
            if missing:
                raise DataError(
                    f"{len(missing)} {source} conversation(s) not found in the installed corpus, "
                    f"e.g. {missing[:3]} (is the right chitchat-dataset version installed?)"
                )
        return {cid: self._cache[cid] for cid in conversation_ids}
