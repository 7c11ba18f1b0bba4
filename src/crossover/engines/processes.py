"""Process-level helpers for the engine lifecycle: ports, process groups, exit texts.

Linux-first: process-group membership is read from /proc; ``PR_SET_PDEATHSIG`` is set
through libc where available.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable

from crossover.errors import UsageError


def free_port(host: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do
        try:
            s.bind((host, port))
        except OSError as exc:
            raise UsageError(f"port {port} on {host} is not free ({exc.strerror})") from None


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``, read from /proc."""
    members: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
            members.append(int(entry.name))
    return members


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


#: threads that live as long as their process (``lifelong_thread``): children they start
#: may get PR_SET_PDEATHSIG, as the main thread's do
_LIFELONG: set[int] = set()


def lifelong_thread(target: Callable[[], object], name: str) -> threading.Thread:
    """A started daemon thread meant to run until its process exits (a Ray actor's event
    loop): engines it starts die with the process, as the main thread's do."""

    def run() -> None:
        _LIFELONG.add(threading.get_ident())
        target()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def pdeathsig_preexec() -> Callable[[], None] | None:
    """Kill the child if this thread dies; only safe from the main thread or a
    ``lifelong_thread`` (they never exit before the process does)."""
    here = threading.current_thread()
    if not sys.platform.startswith("linux") or (
        here is not threading.main_thread() and threading.get_ident() not in _LIFELONG
    ):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def _set() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return _set


def exit_description(rc: int) -> str:
    if rc < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-rc).name}"
        return f"was killed by signal {-rc}"
    return f"exited with status {rc}"
