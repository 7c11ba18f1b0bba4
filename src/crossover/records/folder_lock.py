"""One writer per results folder: an exclusive ``flock`` on ``DIR/.crossover.lock``.

A sweep (``crossover sweep``, a live ``crossover decide``) reads the folder's
``sweep.db`` to resume it and launches engines for what is left. Two of them on one
folder both ran: the second resumed the first's runs and started its engine on the GPU
the first's was using (out of memory; had it fitted, both sweeps' numbers would have
been wrong, silently). The writer holds the lock for its life and writes its pid,
command and start time into the file, so a second one is refused with one line naming
it, before it opens or changes anything in the folder. The kernel drops a ``flock``
when its process dies, so a lock is never stale. Readers (``report``, ``summarize``,
``compare``) take no lock: reading a running sweep is supported.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from crossover.errors import UsageError

#: the lock file's name inside a results folder
LOCK_NAME = ".crossover.lock"


class FolderBusyError(UsageError):
    """Another process writes the results folder: exit 2, and the folder is left as it
    is (a caller that cleans up after a refused command must not clean this one up)."""


def _holder(text: str) -> str:
    """``pid 1234, crossover decide since 2026-...`` from the lock file's content, as
    much of it as can be read (a holder that has just taken the lock has not written it
    yet)."""
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        return "pid unknown"
    words = f"pid {data['pid']}"
    if data.get("command"):
        words += f", crossover {data['command']}"
        if data.get("since"):
            words += f" since {data['since']}"
    return words


def _busy(folder: Path, held: str) -> str:
    return (
        f"{folder} is being written by another crossover process ({held}): "
        "wait for it to end, or give another --out"
    )


class FolderLock:
    """The exclusive lock on a results folder, held from :meth:`take` to
    :meth:`release` (or the process's end)."""

    def __init__(self, path: Path, fh: IO[str]) -> None:
        self.path = path
        self._fh: IO[str] | None = fh

    @classmethod
    def take(cls, folder: Path, command: str) -> FolderLock:
        """Lock ``folder`` (created if missing) for ``command`` (``sweep``, ``decide``),
        without waiting; a ``FolderBusyError`` naming the holder where another process
        has it, the folder's files untouched."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create output folder {folder}: {exc.strerror}") from None
        path = folder / LOCK_NAME
        while True:
            try:
                fh = path.open("a+", encoding="utf-8")  # created if missing, never emptied
            except OSError as exc:
                raise UsageError(f"cannot open {path}: {exc.strerror}") from None
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.seek(0)
                held = _holder(fh.read(4096))
                fh.close()
                raise FolderBusyError(_busy(folder, held)) from None
            except OSError as exc:  # a file system without flock
                fh.close()
                raise UsageError(f"cannot lock {path}: {exc.strerror}") from None
            # the file may have been removed (``release(remove=True)``) between our open
            # and our lock: a lock on a removed file excludes no one, so take it again
            with contextlib.suppress(FileNotFoundError):
                st, now = os.fstat(fh.fileno()), path.stat()
                if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
                    break
            fh.close()
        since = datetime.now(UTC).isoformat(timespec="seconds")
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "command": command, "since": since}) + "\n")
        fh.flush()
        return cls(path, fh)

    @staticmethod
    def refuse_if_busy(folder: Path) -> None:
        """The same refusal as :meth:`take` where another process holds ``folder``'s lock,
        creating and changing nothing (a shared ``flock`` tried and let go at once): a
        command refused for a busy folder says so before its slower checks (servers
        asked, paths looked up), which would only be thrown away."""
        path = folder / LOCK_NAME
        try:
            fh = path.open(encoding="utf-8")
        except OSError:  # no lock file (a new folder), or not readable: take() will say
            return
        with fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                raise FolderBusyError(_busy(folder, _holder(fh.read(4096)))) from None
            except OSError:  # a file system without flock: take() will say
                return
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    @property
    def held(self) -> bool:
        return self._fh is not None

    def release(self, *, remove: bool = False) -> None:
        """Let the folder go (again: nothing); with ``remove``, the lock file is deleted
        first, while still held (a folder this command created and leaves empty)."""
        fh, self._fh = self._fh, None
        if fh is None:
            return
        try:
            with contextlib.suppress(OSError):  # the lock goes whatever the file says
                if remove:
                    self.path.unlink(missing_ok=True)
                else:  # a stale name in the file would only mislead a reader of it
                    fh.seek(0)
                    fh.truncate()
        finally:
            fh.close()  # closing the last descriptor drops the flock

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
