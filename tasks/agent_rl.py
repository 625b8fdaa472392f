"""Stage `agent_rl@<variant>`: multi-turn GRPO of the SFT agent against one frozen training user.

    python -m tasks.agent_rl --variant assistant [--profile tiny]   # prompted:assistant user
    python -m tasks.agent_rl --variant mimesis                      # the trained MIMESIS simulator
    python -m tasks.agent_rl --variant mimesis_csd                  # + CSD (when its `enabled`)

`agent_rl` in params.yaml holds the shared knobs; `agent_rl.variants.<variant>` overrides them (the
training user above all). dvc.yaml runs one stage per variant (`foreach`). Writes the agent folder
(`<output_dir>/<variant>`), the reward curve (`<report_dir>/<variant>/reward_curve.png`) and
registers a `mimesis-agent` version with alias `candidate-<variant>`. A variant with `enabled: false`
writes a placeholder folder and metrics saying so (nothing trained, nothing registered).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mimesis_rl.tracking.registration import RegistrySettings
from mimesis_rl.training.config import resolve_bf16
from tasks._runner import main

STAGE = "agent_rl"


def variant_section(params: dict[str, Any], variant: str) -> tuple[dict[str, Any], RegistrySettings, bool]:
    """(settings section, registry block, enabled) of one variant: shared knobs + its overrides."""
    section = dict(params.get(STAGE) or {})
    variants = dict(section.pop("variants", None) or {})
    registry = RegistrySettings.from_section(section.pop("registry", None), f"{STAGE}.registry")
    if variant not in variants:
        raise ValueError(f"params.yaml agent_rl.variants: no variant {variant!r}; known: {sorted(variants)}")
    override = dict(variants[variant] or {})
    enabled = bool(override.pop("enabled", True))
    override.pop("user_dep", None)  # dvc.yaml's dependency of the variant, not a trainer setting
    merged = {**section, **override, "variant": variant}
    if "csd" in section and "csd" in override:
        merged["csd"] = {**dict(section["csd"] or {}), **dict(override["csd"] or {})}
    merged["output_dir"] = str(Path(section.get("output_dir", "models/agent/rl")) / variant)
    merged["report_dir"] = str(Path(section.get("report_dir", "reports/agent_rl")) / variant)
    merged["checkpoint_dir"] = str(Path(section.get("checkpoint_dir", "checkpoints/agent_rl")) / variant)
    merged["bf16"] = resolve_bf16(params, merged)
    return merged, registry, enabled


def settings(params: dict[str, Any], variant: str) -> tuple[Any, RegistrySettings, bool]:
    from mimesis_rl.agent.rl_settings import AgentRLSettings

    section, registry, enabled = variant_section(params, variant)
    return AgentRLSettings.from_section(section, f"agent_rl.variants.{variant}"), registry, enabled


def _placeholder(s: Any) -> dict[str, Any]:
    from mimesis_rl.fsutil import write_json

    for folder in (s.output_dir, s.report_dir):
        Path(folder).mkdir(parents=True, exist_ok=True)
        write_json(Path(folder) / "DISABLED.json", {"variant": s.variant, "enabled": False,
                                                    "why": "agent_rl.variants.<variant>.enabled is false"})
    return {"variant": s.variant, "enabled": 0}


def make_body(variant: str):  # noqa: ANN201 - the stage body for `_runner.main`
    def inputs(params: dict[str, Any]) -> list[str]:
        s, _, _ = settings(params, variant)
        paths = [s.sft_dir, s.base_model]
        if s.user.startswith("learned:") and ":/" not in s.user[len("learned:"):]:
            paths.append(s.user[len("learned:"):])
        return paths

    def run(params: dict[str, Any]) -> dict[str, Any]:
        import mlflow

        from mimesis_rl.agent.registry import log_agent
        from mimesis_rl.agent.rl import train_agent_rl
        from mimesis_rl.tracking import content_hash
        from mimesis_rl.training.launch import run_stage

        s, registry, enabled = settings(params, variant)
        mlflow.log_dict(s.to_json(), f"{STAGE}/{variant}.settings.json")
        if not enabled:
            return _placeholder(s)
        seed = int(params.get("seed", 0))
        # `launcher: accelerate`: workers log into this stage run ($MIMESIS_TRAIN_RUN_ID)
        metrics = run_stage("mimesis_rl.agent.rl", train_agent_rl, s, {"seed": seed}, seed=seed)
        if registry.register:
            metrics.update(log_agent(s.output_dir, variant, user=s.user,
                                     data_version=f"agent_sft:{content_hash(s.sft_dir)}",
                                     csd=bool(s.csd.get("enabled")), csd_lambda=float(s.csd.get("lam", 0.0)),
                                     registry=registry))
        return metrics

    return run, inputs


def cli(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--variant", required=True)
    known, rest = parser.parse_known_args(argv)
    run, inputs = make_body(known.variant)
    return main(f"{STAGE}@{known.variant}", run, inputs, argv=rest)


if __name__ == "__main__":
    cli()
