from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mimesis_rl.config import flatten, load_params, set_profile

PARAMS = """\
# a comment that must survive
profile: demo
seed: 3
ingest:
  limit_per_source: null
  sources: [{adapter: chitchat, input: embedded}]
profiles:
  demo: {}
  tiny:
    ingest: {limit_per_source: 5}
"""


@pytest.fixture
def params_file(tmp_path: Path) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(PARAMS)
    return path


def test_profile_overrides_are_deep_merged(params_file: Path) -> None:
    demo = load_params(params_file)
    tiny = load_params(params_file, profile="tiny")
    assert demo["ingest"]["limit_per_source"] is None and demo["profile"] == "demo"
    sources = [{"adapter": "chitchat", "input": "embedded"}]
    assert tiny["ingest"] == {"limit_per_source": 5, "sources": sources}
    assert "profiles" not in tiny


def test_set_profile_keeps_comments_and_rejects_unknown(params_file: Path) -> None:
    set_profile("tiny", params_file)
    text = params_file.read_text()
    assert "# a comment that must survive" in text
    assert yaml.safe_load(text)["profile"] == "tiny"
    assert load_params(params_file)["ingest"]["limit_per_source"] == 5
    with pytest.raises(ValueError, match="unknown profile 'huge'"):
        set_profile("huge", params_file)
    with pytest.raises(ValueError, match="unknown profile"):
        load_params(params_file, profile="huge")


def test_missing_params_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="params.yaml"):
        load_params(tmp_path / "params.yaml")


def test_flatten() -> None:
    assert flatten({"a": {"b": 1, "c": {"d": 2}}, "e": {}}) == {"a.b": 1, "a.c.d": 2, "e": {}}


def test_project_params_load_for_every_profile() -> None:
    root = Path(__file__).resolve().parents[2]
    raw = yaml.safe_load((root / "params.yaml").read_text())
    for name in raw["profiles"]:
        assert load_params(root / "params.yaml", profile=name)["profile"] == name


def test_each_profile_records_into_its_own_experiment() -> None:
    from mimesis_rl.config import load_params
    from mimesis_rl.tracking.runs import DEFAULT_EXPERIMENT, experiment_name

    assert experiment_name(load_params(profile="demo")) == DEFAULT_EXPERIMENT
    assert experiment_name(load_params(profile="evidence")) == "mimesis-evidence"
    assert experiment_name(None) == DEFAULT_EXPERIMENT
