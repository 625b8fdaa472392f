"""params.yaml is typed and strict: every bad input names the file and the key path, never a traceback."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mimesis_rl.cli import app
from mimesis_rl.config import load_params
from mimesis_rl.params.check import ParamsError, check_params, check_raw

REPO = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((REPO / "params.yaml").read_text())


DROP = object()


def _problems(key: str, value: object) -> list[str]:
    """Problems of the project's params with `key` (a dotted path) set to `value` (DROP: removed)."""
    raw = copy.deepcopy(RAW)
    *parents, last = key.split(".")
    where = raw
    for part in parents:
        where = where[part]
    if value is DROP:
        del where[last]
    else:
        where[last] = value
    return check_raw(raw, "p.yaml")


def test_the_project_params_and_every_profile_pass() -> None:
    assert check_params(REPO / "params.yaml")
    for name in RAW["profiles"]:
        assert load_params(REPO / "params.yaml", profile=name)["profile"] == name


FRACTIONS = "split.fractions"
INT = "Input should be a valid integer"


@pytest.mark.parametrize(("key", "value", "expected"), [
    (FRACTIONS, {"train": 0.8, "val": 0.1, "tset": 0.1}, "tset: unknown key (did you mean `test`?)"),
    ("seed", 12.7, f"seed: {INT}"),
    ("seed", "abc", f"seed: {INT}"),
    (FRACTIONS, "0.8,0.1,0.1", "split.fractions: Input should be a valid dictionary"),
    (FRACTIONS, {"train": 0.8, "val": 0.6, "test": 0.1}, "must sum to 1, got 1.5"),
    (FRACTIONS, {"train": 1.2, "val": -0.1, "test": -0.1}, "greater than or equal to 0"),
    ("validate.pii_acton", "flag", "validate.pii_acton: unknown key (did you mean `pii_action`?)"),
    ("validate.min_turns", 2000, "validate.min_turns: 2000 is above"),
    ("label", DROP, "missing section(s) label"),
    ("serve.max_batch", 0, "serve.max_batch: Input should be greater than or equal to 1"),
    ("sim_sft.lora.r", "16", f"sim_sft.lora.r: {INT}"),
    ("profiles.tiny.sim_sft.lora.rr", 3, "profiles.tiny.sim_sft.lora.rr: unknown key"),
    ("profiles.tiny.split", {"fractions": {"train": 0.9}}, "(merged).split.fractions: must sum"),
    ("sim_panel.max_stepz", 3, "sim_panel.max_stepz: unknown key (not a sim_sft key nor a TRL SFTConfig "
                               "field) (did you mean `max_steps`?)"),
    ("agent_rl.variants.mimesis.usr", "x", "agent_rl.variants.mimesis.usr: unknown key"),
    ("profile", "huge", "unknown profile 'huge'"),
    ("sim_sft.learnig_rate", 1e-3, "sim_sft.learnig_rate: unknown key (not a sim_sft key nor a TRL"),
    ("sim_rl.registry.bundle_base", "sometimes", "sim_rl.registry.bundle_base"),
    ("agent_rl.learning_rate", "1e-4", "YAML 1.1 read it as text: write 1.0e-3"),
    ("serve.api_keys", ["secret-0123456789abcdef"], "serve.api_keys: Value error, API keys never go in"),
])
def test_a_bad_value_names_the_file_and_key_path(key: str, value: object, expected: str) -> None:
    problems = _problems(key, value)
    assert any(p.startswith("p.yaml: ") and expected in p for p in problems), problems
    assert not any("secret-" in p for p in problems)  # a key put in the file is never echoed


@pytest.mark.parametrize(("text", "expected"), [
    ("", "the file is empty"),
    ("seed: [1\n", "line 2, column 1: YAML syntax error"),
    ("- a\n- b\n", "must hold a mapping"),
    ("\udcff".encode("utf-8", "surrogateescape").decode("latin-1"), None),
])
def test_unreadable_files_give_one_clear_error(tmp_path: Path, text: str, expected: str | None) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ParamsError) as info:
        check_params(path)
    assert str(path) in str(info.value)
    if expected:
        assert expected in str(info.value)


def test_trl_fields_and_aliases_may_sit_at_the_top_of_a_training_section() -> None:
    """sim_sft / sim_rl lift TRL fields (and batch_size, grad_accum) into the trainer options."""
    raw = copy.deepcopy(RAW)
    raw["sim_sft"].update(learning_rate=1e-3, batch_size=2)
    raw["sim_rl"].update(grad_accum=2)
    raw["sim_panel"]["members"]["seed1"]["warmup_ratio"] = 0.1
    assert check_raw(raw, "p.yaml") == []


def test_sim_sft_phases_are_checked_and_not_inherited_by_the_panel() -> None:
    """A phase may change the data and the trainer, not the model or where the stage writes; the panel's
    members are SFT runs of their own and run neither the training simulator's curriculum nor its curve."""
    from tasks import sim_panel

    raw = copy.deepcopy(RAW)
    raw["sim_sft"]["phases"] = [{"name": "verdicts", "trainer": {"max_steps": 4},
                                 "env": {"domains": ["bargain"], "decision_focus": True}}]
    assert check_raw(raw, "p.yaml") == []
    params = load_params(REPO / "params.yaml")
    params["sim_sft"]["phases"] = raw["sim_sft"]["phases"]
    params["sim_sft"]["curve"] = {"enabled": True, "env_dialogues": 1}
    member, _ = sim_panel.settings(params, "seed1")
    assert member.phases == [] and not member.curve.enabled
    raw["sim_sft"]["phases"] = [{"name": "verdicts", "output_dir": "elsewhere"}]
    assert any("phases" in problem and "output_dir" in problem for problem in check_raw(raw, "p.yaml"))


def test_params_check_command(tmp_path: Path) -> None:
    ok = CliRunner().invoke(app, ["params", "check", "--params", str(REPO / "params.yaml")])
    assert ok.exit_code == 0 and "OK" in ok.output
    bad = copy.deepcopy(RAW)
    bad["split"]["fractions"] = {"train": 0.8, "val": 0.1, "tset": 0.1}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(bad))
    result = CliRunner().invoke(app, ["params", "check", "--params", str(path)])
    assert result.exit_code == 2 and "split.fractions.tset: unknown key" in result.output
    assert "Traceback" not in result.output


def _stage_exit(argv: list[str]) -> tuple[int, str]:
    """Run the split stage as DVC would; (exit code, stderr). stderr is a private buffer, so the
    logging handler the runner installs never points at a stream pytest closes later."""
    import contextlib
    import io

    from tasks import split as split_stage
    from tasks._runner import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        main(split_stage.STAGE, split_stage.run, split_stage.inputs, argv=argv)
    return int(info.value.code or 0), err.getvalue()


def test_the_split_stage_refuses_a_typo_before_writing(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    params = {"profile": "tiny", "seed": 1, "profiles": {"tiny": {}},
              "split": {"input": "in.jsonl", "output_dir": "splits",
                        "fractions": {"train": 0.8, "val": 0.1, "tset": 0.1}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    code, err = _stage_exit(["--params", "params.yaml"])
    assert code == 2 and "split.fractions.tset: unknown key" in err
    assert not (tmp_path / "splits").exists()


def test_a_stage_without_its_section_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "params.yaml").write_text("profile: tiny\nseed: 1\nprofiles: {tiny: {}}\n")
    monkeypatch.chdir(tmp_path)
    code, err = _stage_exit(["--params", "params.yaml"])
    assert code == 2 and "section `split` is missing" in err


# Every settings class built from params.yaml, and its model in mimesis_rl.params.schema: a field added to
# one (a new knob) must be added to the other, or `params check` would refuse the new key.
SETTINGS = {
    "Serve": "serve.settings:ServeSettings", "AgentRLCommon": "agent.rl_settings:AgentRLSettings",
    "CSD": "agent.csd.settings:CSDSettings", "AgentSFT": "agent.sft:AgentSFTSettings",
    "Rollout": "rollout.settings:RolloutSettings", "Remote": "models.inference.remote:RemoteOptions",
    "Training": "training.config:TrainingSettings", "Discriminator": "simulator.rl:DiscriminatorSettings",
    "SimRL": "simulator.rl:RLSettings", "SimSFT": "simulator.sft:SFTSettings",
    "Leave": "simulator.leaving:LeaveSettings", "EnvDialogues": "simulator.env_data:EnvDialogues",
    "Tiny": "models.config:TinySettings", "BaseModel_": "models.config:BaseModelSettings",
    "Models": "models.config:PrecisionSettings", "Lora": "models.config:LoraSettings",
    "Sampling": "models.decoding:SamplingParams", "Validate": "data.validation:ValidationSettings",
    "AgentEval": "eval.generalisation_settings:GeneralisationSettings",
    "Report": "report.settings:ReportSettings", "Evidence": "eval.evidence_settings:EvidenceSettings",
    "EnvironmentEval": "eval.environment_settings:EnvironmentSettings",
    "Fidelity": "eval.fidelity_settings:FidelitySettings",
    "Label": "behavior.labelers.config:LabelSettings",
    "LabelEmbedding": "behavior.labelers.embedding:EmbeddingSettings",
    "Rationalize": "behavior.reasoning.config:RationalizeSettings",
    "RationalizeTemplate": "behavior.reasoning.config:TemplateSettings",
    "RationalizeModel": "behavior.reasoning.config:ModelSettings",
    "RationalizeLLM": "behavior.reasoning.config:LLMSettings",
    "Ingest": "data.ingest:IngestSettings", "Split": "data.splitting:SplitSettings",
    "Promote": "tracking.promotion:PromoteSettings", "Gate": "tracking.promotion:GateSettings",
    "Rule": "tracking.promotion:Rule", "SimEval": "eval.sim_eval_settings:SimEvalSettings",
    "Registry": "tracking.registration:RegistrySettings",
}
SET_BY_CODE = {"AgentRLCommon": {"variant"}}  # filled in by the stage, never written in params.yaml


@pytest.mark.parametrize("model", sorted(SETTINGS))
def test_the_schema_knows_every_settings_field(model: str) -> None:
    import dataclasses
    import importlib
    from typing import get_type_hints

    import mimesis_rl.params.schema as schema

    module, name = SETTINGS[model].split(":")
    cls = getattr(importlib.import_module(f"mimesis_rl.{module}"), name)
    missing = {f.name for f in dataclasses.fields(cls)} - set(get_type_hints(getattr(schema, model)))
    assert missing <= SET_BY_CODE.get(model, set()), (
        f"{name} has field(s) {sorted(missing)} that mimesis_rl.params.schema.{model} does not know: "
        "add them there")


def test_the_schema_knows_every_simulator_reward() -> None:
    from typing import get_args

    import mimesis_rl.params.schema as schema
    from mimesis_rl.simulator.rewards import REWARD_NAMES

    assert set(get_args(schema.RewardName)) == set(REWARD_NAMES)
