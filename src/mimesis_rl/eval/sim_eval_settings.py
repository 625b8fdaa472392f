"""Settings of the `sim_eval` stage (params.yaml `sim_eval:`): what is compared, on which data, how.

Why its own module: the stage's section holds the fidelity part (`FidelitySettings`), the
environment part (`EnvironmentSettings`) and the stage's own keys; this puts the three together,
built through mimesis_rl.settings.from_section, so the stage reads typed settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mimesis_rl.eval.environment_settings import EnvironmentSettings
from mimesis_rl.eval.fidelity_settings import FidelitySettings
from mimesis_rl.settings import from_section


@dataclass(frozen=True)
class SimEvalSettings:
    """`sim_eval`: the simulators against held-out real users, then as the user side of the domains.

    data: held-out conversations (JSONL); base_model: the base of adapters and of `assistant`.
    simulators: name -> spec (a folder, an MLflow URI, `assistant`, `openai:...`), in the order given;
    a list in params.yaml (names like `sft+rl` are no MLflow keys). labeler: who labels the turns.
    report_dir: where fidelity.{md,png,json} and environment.{png,json} go.
    device / bf16 / batch_size: where and how generation runs.
    fidelity / environment: the two parts' own settings. decision_items: about this many held-out
    proposals (and as many questions; `simulator.curve.held_out_items`, the curves' items) each
    simulator replies to, read as the environment reads them: claim 1's decision accuracy beside
    its Turing distance (`eval.decisions`; 0: not measured).
    """

    data: str
    base_model: str
    simulators: dict[str, str]
    report_dir: str
    labeler: str = "rules"
    device: str = "auto"
    bf16: str | bool = "auto"
    batch_size: int = 16
    fidelity: FidelitySettings = field(default_factory=FidelitySettings)
    environment: EnvironmentSettings = field(default_factory=EnvironmentSettings)
    decision_items: int = 0

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> SimEvalSettings:
        """From the whole params: the fidelity part's `seed` defaults to params.yaml `seed`."""
        section = dict(params.get("sim_eval") or {})
        fidelity = dict(section.pop("fidelity", None) or {})
        fidelity.setdefault("seed", int(params.get("seed", 0)))
        nested: dict[str, Any] = {
            "fidelity": from_section(FidelitySettings, fidelity, "sim_eval.fidelity"),
            "environment": from_section(EnvironmentSettings, section.pop("environment", None),
                                        "sim_eval.environment")}
        if "simulators" in section:
            nested["simulators"] = _simulators(section["simulators"])
        return from_section(cls, section, "sim_eval", **nested)


def _simulators(entries: Any) -> dict[str, str]:
    """name -> spec, from the list of `{name, spec}` entries."""
    out = {}
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != {"name", "spec"}:
            raise ValueError(f"sim_eval.simulators: expected {{name, spec}} entries, got {entry!r}")
        out[str(entry["name"])] = str(entry["spec"])
    return out
