"""The shared-library build for llama-cpp-python: the llama-server build's flags with
``BUILD_SHARED_LIBS=ON``, a cache folder and key of its own (never mistaken for a
llama-server build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.builds.libllama import shared_build
from crossover.builds.llamacpp import build_config


def test_shared_build_flags_and_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROSSOVER_CACHE", str(tmp_path))
    base = build_config(cuda=False)
    sb = shared_build(cuda=False)
    assert "-DBUILD_SHARED_LIBS=OFF" in base.cmake_flags
    assert sb.cmake_flags[-1] == "-DBUILD_SHARED_LIBS=ON"
    assert "-DBUILD_SHARED_LIBS=OFF" not in sb.cmake_flags
    assert [f for f in sb.cmake_flags if "SHARED" not in f] == [
        f for f in base.cmake_flags if "SHARED" not in f
    ]
    assert sb.key != base.key
    assert sb.build_dir.name.startswith("libllama-") and sb.build_dir.name.endswith(sb.key)
    assert sb.lib_dir == sb.build_dir / "build" / "bin"
    assert not base.build_dir.name.startswith("libllama-")
