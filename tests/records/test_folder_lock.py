"""``crossover.records.folder_lock``: one writer per results folder. A second taker is
refused with one line naming the holder, in this process or another; a released (or
dead) holder leaves the folder free; the refused one changes nothing there."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.records.folder_lock import LOCK_NAME, FolderBusyError, FolderLock

ROOT = Path(__file__).resolve().parents[2]

#: a child that takes the lock of argv[1] for argv[2], says so, and holds it until its
#: standard input closes
HOLDER = (
    "import sys; from pathlib import Path; "
    "from crossover.records.folder_lock import FolderLock; "
    "lock = FolderLock.take(Path(sys.argv[1]), sys.argv[2]); "
    "print('held', flush=True); sys.stdin.read(); lock.release()"
)


@contextlib.contextmanager
def held_by_child(folder: Path, command: str) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``folder``'s lock as ``command`` until the block ends; it is
    killed then, not released (the kernel drops its lock)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), command],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        yield child
    finally:
        child.kill()
        child.wait()


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_a_second_taker_is_refused_naming_the_first(tmp_path: Path) -> None:
    out = tmp_path / "res"
    first = FolderLock.take(out, "decide")
    try:
        written = json.loads((out / LOCK_NAME).read_text())
        assert written["pid"] == os.getpid() and written["command"] == "decide"
        before = _state(out)
        with pytest.raises(FolderBusyError) as caught:
            FolderLock.take(out, "sweep")
        msg = str(caught.value)
        assert msg == (
            f"{out} is being written by another crossover process (pid {os.getpid()}, "
            f"crossover decide since {written['since']}): wait for it to end, or give "
            "another --out"
        )
        assert "\n" not in msg and isinstance(caught.value, UsageError)
        assert caught.value.exit_code == 2
        assert _state(out) == before  # the refused one wrote nothing
    finally:
        first.release()


def test_released_the_folder_is_free_again(tmp_path: Path) -> None:
    with FolderLock.take(tmp_path, "sweep") as lock:
        assert lock.held
    assert not lock.held
    again = FolderLock.take(tmp_path, "decide")
    assert json.loads((tmp_path / LOCK_NAME).read_text())["command"] == "decide"
    again.release()
    again.release()  # twice: nothing more
    assert (tmp_path / LOCK_NAME).read_text() == ""  # no stale holder named


def test_a_lock_file_removed_while_held_is_not_a_lock_for_two(tmp_path: Path) -> None:
    """``release(remove=True)``: the next taker locks a new file, and a third is refused
    (a taker that opened the old file before its removal must not hold a lock that
    excludes no one)."""
    FolderLock.take(tmp_path, "sweep").release(remove=True)
    assert not (tmp_path / LOCK_NAME).exists()
    second = FolderLock.take(tmp_path, "sweep")
    with pytest.raises(FolderBusyError):
        FolderLock.take(tmp_path, "sweep")
    second.release()


def test_a_holder_that_has_not_written_yet_is_named_as_unknown(tmp_path: Path) -> None:
    lock = FolderLock.take(tmp_path, "sweep")
    try:
        (tmp_path / LOCK_NAME).write_text("")  # taken, its line not yet written
        with pytest.raises(FolderBusyError, match=r"\(pid unknown\)"):
            FolderLock.take(tmp_path, "sweep")
    finally:
        lock.release()


def test_another_process_holding_it_is_named_and_its_end_frees_it(tmp_path: Path) -> None:
    with held_by_child(tmp_path, "decide") as child:
        with pytest.raises(FolderBusyError, match=rf"\(pid {child.pid}, crossover decide since "):
            FolderLock.take(tmp_path, "sweep")
    FolderLock.take(tmp_path, "sweep").release()


def test_refuse_if_busy_probes_without_creating_or_taking(tmp_path: Path) -> None:
    out = tmp_path / "res"
    FolderLock.refuse_if_busy(out)  # no folder: nothing to refuse, nothing created
    assert not out.exists()
    first = FolderLock.take(out, "decide")
    try:
        before = _state(out)
        with pytest.raises(FolderBusyError, match=r"\(pid \d+, crossover decide since "):
            FolderLock.refuse_if_busy(out)
        assert _state(out) == before
    finally:
        first.release()
    FolderLock.refuse_if_busy(out)  # free again: the probe passes and holds nothing
    FolderLock.take(out, "sweep").release()
    with held_by_child(out, "sweep"):  # another process's lock, as a real second writer
        with pytest.raises(FolderBusyError, match="crossover sweep since "):
            FolderLock.refuse_if_busy(out)
