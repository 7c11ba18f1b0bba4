"""A results folder made read-only for a test (a committed sweep on a read-only mount, or
``chmod 444`` files in a ``chmod 555`` folder), and ``crossover`` run where it cannot write
there: root writes into any folder, so as root the command runs without the capabilities
that let it ignore permissions (``setpriv``), and the test is skipped where that cannot be
done."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import crossover

#: the sources the command runs (the tree this test imported, not an installed copy)
SRC = Path(crossover.__file__).resolve().parents[1]
#: what lets root write where permissions forbid it
_DROP = "-dac_override,-dac_read_search"


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder``'s files ``chmod 444`` and the folder ``chmod 555`` while inside."""
    files = [p for p in folder.iterdir() if p.is_file()]
    for p in files:
        p.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield
    finally:
        folder.chmod(0o755)
        for p in files:
            p.chmod(0o644)


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200"}
    env.pop("FORCE_COLOR", None)
    return env


def _prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root writes into a read-only folder, and there is no setpriv to stop it")
    return [setpriv, f"--bounding-set={_DROP}", f"--inh-caps={_DROP}"]


def crossover_cli(args: list[str], unwritable: Path) -> subprocess.CompletedProcess[str]:
    """``python -m crossover ARGS`` unable to write into the folder ``unwritable`` (made
    read-only by the caller), which is checked first: a test that could write there
    would prove nothing."""
    prefix = _prefix()
    probe = "import pathlib, sys; pathlib.Path(sys.argv[1], 'probe').touch()"
    tried = subprocess.run(
        [*prefix, sys.executable, "-c", probe, str(unwritable)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if tried.returncode == 0:
        (unwritable / "probe").unlink()
        pytest.skip(f"{unwritable} stays writable here (permissions not enforced)")
    if "PermissionError" not in tried.stderr:
        pytest.skip(f"cannot run a command without write access here: {tried.stderr[-200:]}")
    return subprocess.run(
        [*prefix, sys.executable, "-m", "crossover", *args],
        capture_output=True, text=True, env=_env(), timeout=120, check=False,
    )  # fmt: skip


def writable_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -m crossover ARGS`` as ``crossover_cli`` runs it, with nothing read-only."""
    return subprocess.run(
        [sys.executable, "-m", "crossover", *args],
        capture_output=True, text=True, env=_env(), timeout=120, check=False,
    )  # fmt: skip
