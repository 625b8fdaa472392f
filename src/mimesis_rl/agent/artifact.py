"""An agent on disk: the same folder shape as a simulator (`mimesis.json` with role `agent`), so
`mimesis envs rollout --agent model:FOLDER` / `models:/mimesis-agent@…` plays it through the
`model:` resolver, and evaluation loads it like any other party."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from mimesis_rl.models.artifact import ModelManifest, base_reference, publish, staging_dir, write_manifest
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.lora import save_adapter

AGENT_FORMAT = {
    "name": "chat-agent",
    "version": "mimesis-agent-v1",
    "actions": "<action>{json}</action>, at most one per message",
}


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
