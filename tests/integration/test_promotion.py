"""The promotion gate against a real MLflow registry: first candidate promotes, a worse one is
refused (champion unchanged, decision recorded on the version), a better one moves the alias."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest

from mimesis_rl.tracking.promotion import Metric, Rule, decide, promote, recorded_metrics

pytestmark = pytest.mark.integration

NAME = "mimesis-simulator"
RULES = [Rule("fidelity_index", "higher"), Rule("turing_distance", "lower", interval="not_worse")]


def _register(tmp_path: Path, tag: str) -> str:
    folder = tmp_path / tag
    folder.mkdir()
    (folder / "mimesis.json").write_text(json.dumps({"tag": tag}))
    client = mlflow.MlflowClient()
    with mlflow.start_run():
        mlflow.log_artifacts(str(folder), artifact_path="simulator")
        source = mlflow.get_artifact_uri("simulator")
        run_id = mlflow.active_run().info.run_id
    try:
        client.get_registered_model(NAME)
    except mlflow.exceptions.MlflowException:
        client.create_registered_model(NAME)
    version = client.create_model_version(NAME, source=source, run_id=run_id)
    client.set_registered_model_alias(NAME, "candidate", version.version)
    return str(version.version)


def _metrics(fi: float, td: float, ci: tuple[float, float]) -> dict[str, Metric]:
    return {"fidelity_index": Metric(fi), "turing_distance": Metric(td, *ci)}


def test_first_promotes_worse_is_refused_better_moves_champion(tmp_path: Path) -> None:
    client = mlflow.MlflowClient()
    v1 = _register(tmp_path, "v1")
    first = promote(NAME, _metrics(60.0, 80.0, (70.0, 90.0)), RULES)
    assert first.promoted and first.champion_version is None
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == v1

    v2 = _register(tmp_path, "v2")  # deliberately worse on both measures
    worse = promote(NAME, _metrics(55.0, 95.0, (90.0, 99.0)), RULES)
    assert not worse.promoted and worse.champion_version == v1
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == v1  # champion unchanged
    tags = client.get_model_version(NAME, v2).tags
    assert tags["mimesis.gate.decision"] == "refused"
    assert "FAILS fidelity_index" in tags["mimesis.gate.reasons"]
    assert tags["mimesis.gate.compared_with"] == v1

    v3 = _register(tmp_path, "v3")
    better = promote(NAME, _metrics(66.0, 70.0, (60.0, 79.0)), RULES)
    assert better.promoted and better.champion_version == v1
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == v3
    # The champion's numbers travel with it: the next candidate is compared with v3's, not v1's.
    assert recorded_metrics(client.get_model_version(NAME, v3).tags)["fidelity_index"].value == 66.0
    assert recorded_metrics(client.get_model_version(NAME, v3).tags)["turing_distance"].low == 60.0


def test_interval_rules() -> None:
    champion = {"turing_distance": Metric(80.0, 75.0, 85.0)}
    not_worse = [Rule("turing_distance", "lower", interval="not_worse")]
    significantly = [Rule("turing_distance", "lower", interval="better")]
    within_noise = {"turing_distance": Metric(79.0, 70.0, 88.0)}
    clearly = {"turing_distance": Metric(60.0, 50.0, 70.0)}
    assert decide(within_noise, champion, not_worse)[0]
    assert not decide(within_noise, champion, significantly)[0]
    assert decide(clearly, champion, significantly)[0]
    assert not decide({"turing_distance": Metric(79.0)}, champion, not_worse)[0]  # the rule needs an interval
    assert not decide({}, None, not_worse)[0]  # nothing measured: never promoted, even without a champion
    tolerant = [Rule("turing_distance", "lower", min_gain=-2.0)]
    assert decide({"turing_distance": Metric(81.5)}, champion, tolerant)[0]
    with pytest.raises(ValueError, match="better must be"):
        Rule("x", "up")  # type: ignore[arg-type]
