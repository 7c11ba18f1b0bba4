"""The stub's environment under ``--engine-python``: a package the engine's venv holds in a
NumPy-2-only release gets a NumPy-1 build beside NumPy 1.26.4 (on the H200 the venv's SciPy
1.18.1 broke vLLM's start under the stub's NumPy: docs/results/h200/triton)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from crossover.builds import triton
from crossover.errors import UsageError


@pytest.mark.parametrize(
    ("requires", "needs"),
    [
        (["numpy<2.8,>=2.0.0"], True),  # SciPy 1.18.1's
        (["numpy (>=2.0)"], True),
        (["numpy>=2"], True),
        (["numpy<2.3,>=1.23.5"], False),  # SciPy 1.14.1's
        (["numpy"], False),
        (["numpydoc>=2"], False),  # another project
        (['numpy>=2.1; extra == "test"'], False),  # only for an extra
        (["numpy>=2; python_version >= '3.12'"], True),
        ([], False),
    ],
)
def test_needs_numpy2(requires: list[str], needs: bool) -> None:
    assert triton.needs_numpy2(requires) is needs


def _dist(site: Path, name: str, version: str, requires: list[str]) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


def test_engine_venv_read_by_its_own_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine interpreter is asked (its own importlib.metadata, real dist-info folders):
    SciPy requiring NumPy 2 gets SciPy 1.14.1 in the stub's environment; one that runs on
    NumPy 1 (or none at all) adds nothing."""
    new = tmp_path / "new"
    _dist(new, "scipy", "1.18.1", ["numpy<2.8,>=2.0.0"])
    monkeypatch.setenv("PYTHONPATH", str(new))
    assert triton.numpy2_held(sys.executable)[0] == ["scipy==1.14.1"]
    old = tmp_path / "old"
    _dist(old, "scipy", "1.14.1", ["numpy<2.3,>=1.23.5"])
    monkeypatch.setenv("PYTHONPATH", str(old))
    assert triton.numpy2_held(sys.executable)[0] == []


def test_an_engine_python_that_cannot_run_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot run"):
        triton.numpy2_held(str(tmp_path / "no-python"))


def test_every_numpy2_only_package_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond the ones replaced, every distribution requiring NumPy 2 is named (JAX-like
    packages that would fail under the stub's NumPy 1.26.4), read by the engine
    interpreter's own importlib.metadata."""
    site = tmp_path / "site"
    _dist(site, "scipy", "1.18.1", ["numpy<2.8,>=2.0.0"])  # replaced: not named
    _dist(site, "jaxlib", "0.8.1", ["numpy>=2.0"])
    _dist(site, "opencv-python-headless", "4.12.0.88", ['numpy<2.3.0,>=2; python_version >= "3.9"'])
    _dist(site, "pandas", "2.3.3", ["numpy>=1.26.0"])  # runs on NumPy 1
    monkeypatch.setenv("PYTHONPATH", str(site))
    named = triton.numpy2_held(sys.executable)[1]
    assert "jaxlib==0.8.1" in named and "opencv-python-headless==4.12.0.88" in named
    assert not any(n.startswith(("scipy==", "pandas==")) for n in named)
