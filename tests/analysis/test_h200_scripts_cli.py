"""``scripts/h200/waves.py`` and ``scripts/h200/sglang_gap.py`` from the shell: a folder
that holds neither sweep.db nor sweep.db.xz (or a level list that is not numbers) is one
line and status 1, not a FileNotFoundError's traceback; piped into a reader that stops
early (``| head``) they stop quietly with 141, as the crossover CLI does
(``crossover.pipes.run_tool``), not with a BrokenPipeError's traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.readonly import SRC

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "h200"
SWEEP = ROOT / "docs" / "results" / "h200" / "sweep"
SCRIPT_NAMES = ["waves", "sglang_gap"]


def _run(script: str, *args: str, stdout: int = subprocess.PIPE) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / f"{script}.py"), *args], stdout=stdout,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=120, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_a_folder_of_no_database_is_one_line(tmp_path: Path, script: str) -> None:
    assert _run(script, str(tmp_path)) == (
        1,
        f"{tmp_path}: no sweep.db or sweep.db.xz in this folder\n",
    )
    assert list(tmp_path.iterdir()) == []  # nothing made there


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_levels_that_are_not_numbers_are_one_line(script: str) -> None:
    assert _run(script, str(SWEEP), "", "1,x") == (
        1,
        "1,x: levels are whole numbers, e.g. 1,16,64\n",
    )


def test_a_missing_compressed_database_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "sweep.db.xz"
    assert _run("waves", str(missing)) == (1, f"{missing}: no such file\n")


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_a_reader_that_has_gone_stops_it_quietly(script: str) -> None:
    """Standard output a pipe whose reader closed before the script wrote anything."""
    read, write = os.pipe()
    os.close(read)
    try:
        got = _run(script, str(SWEEP), stdout=write)
    finally:
        os.close(write)
    assert got == (141, "")
