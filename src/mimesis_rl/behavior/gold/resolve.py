"""Turn references into text: the gold set stores corpus turns as (conversation id, turn index) only.

The text comes from the corpus itself, read through the project's own adapter, so the ids and turn
indices are exactly those the pipeline produces:

- `chitchat`: the corpus installed with the project (PyPI `chitchat-dataset`, MIT);
- `casino`: CaSiNo (CC BY 4.0), which the project must not ship; it is read from the folder named
  by `MIMESIS_CASINO_DIR`, else `../shared/data/casino` next to the project root (the folder of
  params.yaml) or next to the checkout this package lives in (`casino_{train,valid,test}.json`, as
  published). When that folder is absent the source is
  *unavailable*: `SourceUnavailable` says so, and the gold loader leaves those items out, loudly.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path

from mimesis_rl.data.adapters import get_adapter
from mimesis_rl.data.jsonl import DataError
from mimesis_rl.data.schema import Conversation

SUPPORTED_SOURCES = ("chitchat", "casino")
CASINO_ENV = "MIMESIS_CASINO_DIR"
CASINO_FILES = ("casino_train.json", "casino_valid.json", "casino_test.json")


class SourceUnavailable(DataError):
    """A corpus the gold set refers to is not present on this machine (e.g. CaSiNo outside ../shared)."""


def casino_dir() -> Path:
    """Where CaSiNo's published JSON files are read from (they are never copied into the project)."""
    if os.environ.get(CASINO_ENV):
        return Path(os.environ[CASINO_ENV])
    from mimesis_rl.config import project_root

    candidates = [project_root(), Path(__file__).resolve().parents[4]]
    for root in candidates:
        folder = root.parent / "shared" / "data" / "casino"
        if folder.is_dir():
            return folder
    return candidates[0].parent / "shared" / "data" / "casino"


def casino_files() -> list[Path]:
    """The CaSiNo files present; SourceUnavailable when the folder or all files are missing."""
    folder = casino_dir()
    files = [folder / name for name in CASINO_FILES if (folder / name).exists()]
    if not files:
        raise SourceUnavailable(
            f"casino: no {'/'.join(CASINO_FILES)} under {folder} (set {CASINO_ENV} to CaSiNo's folder)"
        )
    return files


@functools.lru_cache(maxsize=2)
def _casino_conversations(paths: tuple[Path, ...], mtimes: tuple[float, ...]) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    adapter = get_adapter("casino")
    for path in paths:
        for item in adapter.read(str(path)):
            if isinstance(item, Conversation):
                out[item.conversation_id] = item
    return out


def casino_conversations() -> dict[str, Conversation]:
    """Every CaSiNo view (`casino-<dialogue>-a|b`) of the files present, read once per file version."""
    files = casino_files()
    return _casino_conversations(tuple(files), tuple(p.stat().st_mtime for p in files))


class CorpusResolver:
    """Reads each corpus once and keeps the conversations that were asked for."""

    def __init__(self) -> None:
        self._cache: dict[str, Conversation] = {}

    def _read(self, source: str, wanted: set[str]) -> None:
        if source == "casino":
            everything = casino_conversations()
            self._cache.update({cid: everything[cid] for cid in wanted if cid in everything})
            return
        for item in get_adapter(source).read("embedded"):
            if isinstance(item, Conversation) and item.conversation_id in wanted:
                self._cache[item.conversation_id] = item

    def fetch(self, source: str, conversation_ids: Iterable[str]) -> dict[str, Conversation]:
        """The conversations with these ids; a missing one raises DataError naming it, a missing corpus
        SourceUnavailable."""
        if source not in SUPPORTED_SOURCES:
            raise DataError(f"unsupported gold source {source!r}; supported: {', '.join(SUPPORTED_SOURCES)}")
        conversation_ids = list(conversation_ids)
        wanted = set(conversation_ids) - set(self._cache)
        if wanted:
            self._read(source, wanted)
            missing = sorted(wanted - set(self._cache))
            if missing:
                raise DataError(
                    f"{len(missing)} {source} conversation(s) not found in the corpus, e.g. {missing[:3]} "
                    f"(is the right {'CaSiNo release' if source == 'casino' else 'chitchat-dataset version'} "
                    "there?)"
                )
        return {cid: self._cache[cid] for cid in conversation_ids}
