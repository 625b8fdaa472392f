"""Which base a model folder loads over (`resolve_base`): bundled, the recorded path, or the registered
version its manifest names; the choice is made from the base manifests, no model is loaded."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from mimesis_rl.models.artifact import ModelManifest, base_reference
from mimesis_rl.models.inference.sources import resolve_base


def _base(folder: Path, corpus: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "mimesis_base.json").write_text(json.dumps({"kind": "tiny", "corpus_sha256": corpus}))
    return folder


def _manifest(base: Path, **extra: str) -> ModelManifest:
    return ModelManifest(kind="lora", base={**base_reference(base), **extra})


def test_bundled_copy_first(tmp_path: Path) -> None:
    recorded = _base(tmp_path / "base", "a")
    model = tmp_path / "model"
    bundled = _base(model / "base", "a")
    assert resolve_base(model, _manifest(recorded, uri="models:/mimesis-base/1")) == bundled


def test_recorded_path_when_it_holds_the_recorded_base(tmp_path: Path) -> None:
    base = _base(tmp_path / "base", "a")
    (tmp_path / "model").mkdir()
    assert resolve_base(tmp_path / "model", _manifest(base, uri="models:/mimesis-base/1")) == base


def test_another_base_at_the_path_without_a_uri_is_used_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base = _base(tmp_path / "base", "a")
    manifest = _manifest(base)
    (base / "mimesis_base.json").write_text(json.dumps({"kind": "tiny", "corpus_sha256": "b"}))
    (tmp_path / "model").mkdir()
    with caplog.at_level(logging.WARNING):
        assert resolve_base(tmp_path / "model", manifest) == base
    assert "differs from the one the model was trained on" in caplog.text


@pytest.mark.integration  # an (empty) sqlite MLflow store answers
def test_another_base_at_the_path_with_a_uri_goes_to_the_registry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The URI is fetched (here from an empty sqlite store, so the error names both the path and the URI)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'empty.db'}")
    monkeypatch.setenv("MIMESIS_CACHE_DIR", str(tmp_path / "cache"))
    base = _base(tmp_path / "base", "a")
    manifest = _manifest(base, uri="models:/mimesis-base/7")
    (base / "mimesis_base.json").write_text(json.dumps({"kind": "tiny", "corpus_sha256": "b"}))
    (tmp_path / "model").mkdir()
    with pytest.raises(FileNotFoundError, match="registry version models:/mimesis-base/7 could not be"):
        resolve_base(tmp_path / "model", manifest)


def test_nothing_to_load_over(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    manifest = ModelManifest(kind="lora", base={"path": str(tmp_path / "gone"), "manifest": {}})
    with pytest.raises(FileNotFoundError, match="not found"):
        resolve_base(tmp_path / "model", manifest)
