"""An agent on disk: the same folder shape as a simulator (`mimesis.json` with role `agent`), so
`mimesis envs rollout --agent model:FOLDER` / `models:/mimesis-agent@…` plays it through the
`model:` resolver, and evaluation loads it like any other party."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mimesis_rl.models.artifact import (
    MANIFEST,
    ModelManifest,
    base_reference,
    publish,
    read_manifest,
    staging_dir,
    write_manifest,
)
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.lora import save_adapter

AGENT_FORMAT = {
    "name": "chat-agent",
    "version": "mimesis-agent-v1",
    "actions": "<action>{json}</action>, at most one per message",
}
LONGEST_TURN = "longest_turn_tokens"  # mimesis.json extra: the warm start's longest agent turn


def longest_turn_tokens(examples: Iterable[Mapping[str, Any]], tokenizer: Any) -> int:
    """The longest agent (assistant) turn of transcripts in chat form, in tokens with its end token: the
    least `agent_max_new_tokens` that lets the agent say what it learned (a final action cut before
    `</action>` is invalid, so no deal closes)."""
    return max((len(tokenizer(m["content"], add_special_tokens=False)["input_ids"]) + 1
                for e in examples for m in e["messages"] if m["role"] == "assistant"), default=0)


def recorded_longest_turn(folder: str | Path) -> int | None:
    """The longest turn an agent folder's warm start learned (`LONGEST_TURN`), None where none is recorded."""
    if not (Path(folder) / MANIFEST).exists():
        return None
    longest = read_manifest(folder).extra.get(LONGEST_TURN)
    return int(longest) if longest else None


def turn_budget_problem(folder: str | Path, max_new_tokens: int) -> str | None:
    """Why `max_new_tokens` cuts the agent saved in `folder` short (None when its turns fit, or the folder
    records no longest turn)."""
    longest = recorded_longest_turn(folder)
    if longest is None or max_new_tokens >= longest:
        return None
    return (f"{folder}: agent_max_new_tokens={max_new_tokens} is below the {longest} tokens of the longest "
            "turn its warm start learned: such turns are cut (a final action before </action> is invalid)")


def save_agent(
    model: Any,
    tokenizer: Any,
    output_dir: str | Path,
    base_model: str | Path,
    generation: SamplingParams,
    stage: str,
    adapter: str = "default",
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write adapter/, tokenizer/ and mimesis.json (role agent, kind lora) atomically."""
    staged = staging_dir(output_dir)
    save_adapter(model, adapter, staged / "adapter")
    tokenizer.save_pretrained(str(staged / "tokenizer"))
    manifest = ModelManifest(
        kind="lora",
        role="agent",
        base=base_reference(base_model),
        format=dict(AGENT_FORMAT),
        generation=asdict(generation),
        extra={"stage": stage, **(extra or {})},
    )
    write_manifest(staged, manifest)
    return publish(staged, output_dir)
