"""Stage `rationalize`: a private, first-person reasoning trace on every user turn.

    python -m tasks.rationalize [--profile tiny]

Reads the labelled splits (`data/processed/labeled/{train,val,test}.jsonl`), asks the configured
backend (`rationalize.backend`: template | model | llm) for each user turn's reasoning, checks the
written files with Great Expectations (pattern names in the taxonomy, reasoning on every user turn,
reasoning that differs from the message) and only then swaps them into
`data/processed/conversations/`. A failed check names conversation and turn, and leaves the previous
outputs untouched.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mimesis_rl.behavior.reasoning.config import RationalizeSettings, build_rationalizer
from mimesis_rl.behavior.reasoning.expectations import check_reasoning_output
from mimesis_rl.behavior.reasoning.metrics import trace_metrics
from mimesis_rl.data.jsonl import read_conversations, write_jsonl
from mimesis_rl.data.schema import Conversation
from mimesis_rl.fsutil import swap_in_dir, write_json
from tasks._runner import main

STAGE = "rationalize"
GX_RESULT_FILE = "gx_validation_result.json"
log = logging.getLogger("mimesis.rationalize")


def inputs(params: dict[str, Any]) -> list[str]:
    config = RationalizeSettings.from_params(params)
    return [str(Path(config.input_dir) / f"{split}.jsonl") for split in config.splits]


def _load_model(path: str) -> tuple[Any, Any]:
    """The `model` backend's base, on the device/dtype of the models switch, padded left for batches."""
    from mimesis_rl.models.loading import load_base

    return load_base(path, padding_side="left")


def run(params: dict[str, Any]) -> dict[str, Any]:
    config = RationalizeSettings.from_params(params)
    rationalizer = build_rationalizer(config, seed=int(params.get("seed", 0)), load_model=_load_model)
    out_dir, report_dir = Path(config.output_dir), Path(config.report_dir)
    staged = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(staged, ignore_errors=True)
    splits: dict[str, Any] = {}
    everything: list[Conversation] = []
    written: list[Path] = []
    try:
        for split in config.splits:
            source = Path(config.input_dir) / f"{split}.jsonl"
            conversations = read_conversations(source)
            done: list[Conversation] = []
            with tqdm(total=len(conversations), desc=f"rationalize {split}", unit="conv", leave=False) as bar:
                for start in range(0, len(conversations), config.chunk_size):
                    chunk = conversations[start:start + config.chunk_size]
                    done.extend(rationalizer.rationalize(chunk))
                    bar.update(len(chunk))
            write_jsonl(staged / f"{split}.jsonl", done)
            written.append(staged / f"{split}.jsonl")
            splits[split] = {"conversations": len(done), **trace_metrics(done)}
            everything.extend(done)
        check = check_reasoning_output(written, config.max_overlap)
        write_json(report_dir / GX_RESULT_FILE, check.result)
        check.raise_if_failed()
        swap_in_dir(staged, out_dir)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    close = getattr(getattr(rationalizer, "client", None), "close", None)
    if close:
        close()
    metrics = {"backend": config.backend, **trace_metrics(everything), **rationalizer.stats.as_metrics(),
               "splits": splits}
    if rationalizer.stats.fallback_total:
        log.warning("%d of %d traces came from the template fallback: %s", rationalizer.stats.fallback_total,
                    rationalizer.stats.turns, dict(rationalizer.stats.fallbacks))
    return metrics


if __name__ == "__main__":
    main(STAGE, run, inputs)
