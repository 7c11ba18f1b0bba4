"""Output piped into a reader that stops early (``crossover gpus | head -1``): the command
stops quietly with 141 (128 + SIGPIPE, as a shell reports ``seq 100000 | head -1``'s seq),
not a silent exit 1 (typer's and rich's answer to a broken pipe) or a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SWEEP_DB = ROOT / "docs" / "results" / "h200" / "sweep" / "sweep.db"


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"}
    env.pop("FORCE_COLOR", None)
    return env


def _reader_gone(args: list[str], stderr_too: bool = False) -> tuple[int, bytes]:
    """Run ``crossover ARGS`` with standard output a pipe whose reader closed before the
    command wrote anything (stderr into the same pipe with ``stderr_too``)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "crossover", *args], stdout=write,
            stderr=write if stderr_too else subprocess.PIPE, env=_env(), timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)
    return proc.returncode, proc.stderr or b""


@pytest.fixture
def sweep_db(tmp_path: Path) -> Path:
    db = tmp_path / "sweep.db"
    shutil.copyfile(SWEEP_DB, db)
    return db


@pytest.mark.parametrize("how", ["typer.echo", "rich", "version"])
def test_a_closed_stdout_stops_the_command_quietly(how: str, sweep_db: Path) -> None:
    args = {"typer.echo": ["gpus"], "rich": ["summarize", str(sweep_db)],
            "version": ["--version"]}[how]  # fmt: skip
    rc, err = _reader_gone(args)
    assert (rc, err.decode()) == (141, "")


def test_an_error_keeps_its_status_when_stderr_is_gone_too() -> None:
    """``2>&1 | head``: the error line cannot be shown, and the status still says exit 2."""
    assert _reader_gone(["run", "--url", "x"], stderr_too=True)[0] == 2


def test_an_error_is_still_shown_when_only_stdout_is_gone() -> None:
    rc, err = _reader_gone(["run", "--url", "x"])
    assert rc == 2
    assert err.decode().startswith("error: --output-tokens is required")


def test_piped_into_head_one_line_and_nothing_else(sweep_db: Path) -> None:
    """A real ``| head -1``: one line out, nothing on stderr; 0 where everything was
    written before head left, else 141."""
    cmd = f"{sys.executable} -m crossover summarize {sweep_db} | head -1; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(
        ["bash", "-c", cmd], capture_output=True, env=_env(), timeout=120, check=False
    )
    assert proc.returncode in (0, 141)
    assert proc.stderr.decode() == ""
    assert len(proc.stdout.decode().splitlines()) == 1


#: ``crossover gpus`` whose table is read by writing to a socket the other end closed (a
#: real EPIPE, as a connection to an engine gives), its standard output a live pipe
_SOCKET_GONE = """
import socket, sys
import crossover.advise.hardware as hardware
from crossover.cli.app import entry

def rows():
    mine, theirs = socket.socketpair()
    theirs.close()
    mine.sendall(b"x" * 100_000)

hardware.known_gpus = rows
sys.argv = ["crossover", "gpus"]
entry()
"""


def test_a_broken_pipe_not_stdouts_says_so_in_one_line() -> None:
    """typer makes a silent exit 1 of any broken pipe: a socket's is named on stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", _SOCKET_GONE], capture_output=True, env=_env(), timeout=120,
        check=False,
    )  # fmt: skip
    err = proc.stderr.decode()
    assert (proc.returncode, proc.stdout) == (1, b"")
    assert err.startswith("error: connection closed by the other end while crossover was")
    assert err.rstrip().endswith("[Errno 32] Broken pipe") and err.count("\n") == 1
