"""Stage `split`: train/val/test by conversation, stratified by (source, domain), seeded.

    python -m tasks.split [--profile tiny]

Reads the validated conversations and writes `data/processed/splits/{train,val,test}.jsonl`;
both views of one two-party dialogue always share a split.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from mimesis_rl.data.jsonl import DataError, read_conversations, write_jsonl
from mimesis_rl.data.splitting import SplitSettings, split_conversations, split_summary
from mimesis_rl.fsutil import PathError, check_not_inside, check_output_dir, swap_in_dir
from tasks._runner import main

STAGE = "split"


def inputs(params: dict[str, Any]) -> list[str]:
    return [SplitSettings.from_section(params[STAGE]).input]


def run(params: dict[str, Any]) -> dict[str, Any]:
    settings = SplitSettings.from_section(params[STAGE])
    out_dir = Path(settings.output_dir)
    try:  # the output folder is replaced whole: an input inside it would be deleted
        check_output_dir(out_dir, "split.output_dir")
        check_not_inside({"split.input": settings.input}, out_dir, "split.output_dir", "replaced whole")
    except PathError as exc:
        raise DataError(str(exc)) from None
    conversations = read_conversations(settings.input)
    if not conversations:
        raise DataError(f"{settings.input}: no conversations to split")
    splits = split_conversations(conversations, settings.fractions, seed=int(params.get("seed", 0)))
    summary = split_summary(splits)
    if summary["groups_in_several_splits"]:
        raise DataError(f"{summary['groups_in_several_splits']} conversation groups landed in several splits")

    staged = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(staged, ignore_errors=True)
    for name, convs in splits.items():
        write_jsonl(staged / f"{name}.jsonl", convs)
    swap_in_dir(staged, out_dir)
    return {"input": len(conversations), **summary}


if __name__ == "__main__":
    main(STAGE, run, inputs)
