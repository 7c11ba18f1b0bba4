"""The report is a core feature: a plain ``pip install .`` is enough to draw it."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from crossover.cli.app import main

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_matplotlib_is_a_core_dependency_and_the_report_extra_still_exists() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert "matplotlib" in _names(project["dependencies"])
    # old installs asked for crossover[report]: the extra stays, as an alias
    assert "matplotlib" in _names(project["optional-dependencies"]["report"])


def test_report_without_matplotlib_says_the_one_fix(
    sweep_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["report", str(sweep_dir), "--out", str(sweep_dir / "r.html")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1
    assert "pip install 'matplotlib" in lines[0]
