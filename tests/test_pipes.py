"""``crossover.pipes.run_tool``: a ``python -m crossover.*`` tool whose output is piped
into a reader that stops early (``python -m crossover.sweep.reference | head -1``) stops
quietly with 141, as the ``crossover`` CLI does (tests/cli/test_stdout_closed.py), not
with a BrokenPipeError's traceback and 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _reader_gone(module: str, *args: str) -> tuple[int, str]:
    """Run ``python -m MODULE ARGS`` with standard output a pipe whose reader closed
    before the tool wrote anything."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", module, *args], stdout=write, stderr=subprocess.PIPE,
            env=_env(), cwd=ROOT, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(write)
    return proc.returncode, proc.stderr.decode()


@pytest.mark.parametrize(
    "module",
    ["crossover.sweep.reference", "crossover.advise.reference", "crossover.advise.offload_checks"],
)
def test_a_tool_whose_reader_has_gone_stops_quietly(module: str) -> None:
    assert _reader_gone(module) == (141, "")


@pytest.mark.parametrize("args", [["--help"], ["--port", "0"]], ids=["help", "listening"])
def test_the_calibration_server_whose_reader_has_gone_stops_quietly(args: list[str]) -> None:
    """Its help, and its "listening on" line once it serves: typer turned the broken pipe
    into a silent exit 1."""
    assert _reader_gone("crossover.calibration", *args) == (141, "")


def test_an_error_keeps_its_status_and_its_line() -> None:
    rc, err = _reader_gone("crossover.advise.forecast")
    assert rc == 2
    assert err.startswith("error: the following arguments are required")


def test_piped_into_head_one_line_and_nothing_else() -> None:
    """A real ``| head -1``: one line out, nothing on stderr; 0 where everything was
    written before head left, else 141."""
    cmd = f"{sys.executable} -m crossover.sweep.reference | head -1; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(
        ["bash", "-c", cmd], capture_output=True, env=_env(), cwd=ROOT, timeout=120, check=False
    )
    assert proc.returncode in (0, 141)
    assert proc.stderr.decode() == ""
    assert len(proc.stdout.decode().splitlines()) == 1
