"""``crossover engines list``: an engine started as ``python3 -m PKG`` is listed as here
only where that python finds PKG (a bare python3 on PATH is not SGLang)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crossover.cli.app import main


def _fake_python(tmp_path: Path, status: int) -> None:
    """A ``python3`` on PATH whose every ``-c`` program exits ``status`` (0: every module
    found; 1: none)."""
    exe = tmp_path / "python3"
    exe.write_text(f"#!/bin/sh\nexit {status}\n")
    exe.chmod(0o755)


def _listed(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    assert main(["engines", "list"]) == 0
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        name, _, rest = line.partition(" ")
        rows[name] = rest
    return rows


def test_a_python_module_engine_is_not_listed_where_python_cannot_import_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_python(tmp_path, 1)
    monkeypatch.setenv("PATH", str(tmp_path))
    rows = _listed(capsys)
    python = str(tmp_path / "python3")
    module_engines = [r for r in rows.values() if python in r]
    assert module_engines, rows
    for row in module_engines:
        assert f"not found ({python} cannot import " in row


def test_a_python_module_engine_is_listed_where_python_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_python(tmp_path, 0)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + "/nonexistent")
    rows = _listed(capsys)
    python = str(tmp_path / "python3")
    found = [r for r in rows.values() if r.rstrip().endswith(python)]
    assert found, rows
    assert not any("cannot import" in r for r in rows.values())


def test_which_a_known_engine_crossover_does_not_install_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`engines which` of an engine crossover launches but does not install read "unknown
    engine"; it is known, and installed its own way."""
    from crossover.engines import registry

    spec = next(s for s in registry.specs() if s.install is None)
    assert main(["engines", "which", spec.name]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "unknown engine" not in err
    assert f"crossover does not build or install {spec.display_name}" in err
    assert main(["engines", "which", "no-such-engine"]) == 2
    assert "unknown engine 'no-such-engine'" in " ".join(capsys.readouterr().err.split())


def test_install_of_what_is_cached_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second `engines install` finds the cached program: it says so (it read
    "llama-server ready in 0.0 s"), and a new build still says how long it took."""
    import crossover.builds.llamacpp as builds
    import crossover.engines.install as install

    cached = tmp_path / "llama-server"
    monkeypatch.setattr(builds, "ensure_llama_server", lambda *a, **k: cached)
    monkeypatch.setattr(install, "cached_program", lambda spec: cached)
    assert main(["engines", "install", "llamacpp"]) == 0
    said = capsys.readouterr()
    assert said.out.strip() == str(cached)
    assert "llama-server already built (cached), nothing to do" in said.err
    monkeypatch.setattr(install, "cached_program", lambda spec: None)
    assert main(["engines", "install", "llamacpp"]) == 0
    assert "llama-server ready in " in capsys.readouterr().err
