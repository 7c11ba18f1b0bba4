"""Standard output whose reader went away early (``crossover gpus | head -1``): the
command stops quietly with 141, as one SIGPIPE ends, for the ``crossover`` CLI and the
``python -m crossover.*`` tools alike (``run_tool``)."""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys
from collections.abc import Callable
from typing import NoReturn

#: the status of a command stopped because its reader went away (``| head``): 128 + SIGPIPE,
#: as a shell reports ``seq 100000 | head -1``'s seq, which SIGPIPE ended
STDOUT_CLOSED = 128 + signal.SIGPIPE


def watch_stdout() -> int | None:
    """A second descriptor of standard output where it is a pipe or a socket (only those
    have a reader that can go), to ask later whether the reader has gone: rich, meeting a
    broken pipe, points descriptor 1 at /dev/null before it exits. The caller closes it."""
    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):  # captured in tests: no descriptor
        return None
    return os.dup(fd) if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


def broken_pipe(exc: BaseException) -> OSError | None:
    """The broken pipe behind ``exc``: ``exc`` itself, or the one typer's or rich's
    ``SystemExit(1)`` was raised on (typer makes one of any EPIPE, a socket's included);
    None where there is none (another status is the command's own: it stays)."""
    if isinstance(exc, SystemExit) and exc.code != 1:
        return None
    cause = exc if isinstance(exc, OSError) else exc.__context__
    return cause if isinstance(cause, OSError) and cause.errno == errno.EPIPE else None


def stdout_closed(exc: BaseException, watch: int | None) -> bool:
    """Whether ``exc`` is a broken pipe (or typer's or rich's ``SystemExit(1)`` raised on
    one) and it is standard output's reader that has gone, not a socket's or stderr's."""
    import select

    if broken_pipe(exc) is None:
        return False
    if watch is None or not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(watch, select.POLLOUT)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))


def quiet_stdout_closed() -> int:
    """Standard output was closed early: write nothing more and return 141 with no
    message, as a command SIGPIPE ends. Not 0: a sweep cut short so did not finish, and
    ``set -o pipefail`` should see that. SIGPIPE itself stays ignored (Python's default),
    or a server closing a socket would kill a run unannounced. The rest of the output
    goes to /dev/null, so the exit's flush raises nothing either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return STDOUT_CLOSED


def flush_stdout(code: int) -> int:
    """Flush what is still buffered here rather than in the exit's flush (Python's
    "Exception ignored ... BrokenPipeError" and 120); ``code``, or 141 where the reader
    has gone and ``code`` is 0 (an error's status says more)."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        closed = quiet_stdout_closed()
        return code or closed
    return code


def run_tool(main: Callable[[], int]) -> NoReturn:
    """Exit with ``main()``'s status: ``if __name__ == "__main__": run_tool(main)`` in a
    ``python -m crossover.*`` tool, so ``... | head`` ends it quietly with 141, not a
    BrokenPipeError's traceback (or, in a typer tool, typer's silent exit 1)."""
    watch = watch_stdout()
    try:
        try:
            code = main()
        except (SystemExit, BrokenPipeError) as exc:
            if not stdout_closed(exc, watch):
                raise
            code = quiet_stdout_closed()
        code = flush_stdout(code)
    finally:
        if watch is not None:
            os.close(watch)
    sys.exit(code)
