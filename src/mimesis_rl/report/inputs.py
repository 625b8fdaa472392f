"""Reading the stages' outputs: JSON, transcript JSONL and PNGs. A missing file is None (its section
then says so); a malformed one is an error naming the file and line."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Transcript records; a bad line is an error naming the file and line (never skipped silently)."""
    out = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not valid JSON ({exc})") from None
            if not isinstance(record, dict) or not isinstance(record.get("turns"), list):
                raise ValueError(f"{path}:{number}: not a transcript record (no `turns` list)")
            out.append(record)
    return out


@dataclass
class Image:
    """A PNG for the page: base64 (embedded) and its path relative to the report (linked)."""

    title: str
    relative: str
    data: str | None = None

    @property
    def src(self) -> str:
        return f"data:image/png;base64,{self.data}" if self.data else self.relative


def image(path: str | Path, report_dir: Path, title: str, embed: bool) -> Image | None:
    """None when the PNG was not written (the section shows what it has)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        relative = str(path.resolve().relative_to(report_dir.resolve()))
    except ValueError:
        relative = str(path)
    data = base64.b64encode(path.read_bytes()).decode("ascii") if embed else None
    return Image(title=title, relative=relative, data=data)
