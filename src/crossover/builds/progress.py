"""Run a build command, log everything, and show its percent lines as progress.

CMake's Makefile generator prints ``[ 42%] Building ...`` and Ninja prints
``[12/200] ...``; either becomes a rich progress bar on a terminal, or one plain
line per 10% step otherwise (``make test`` output stays readable in CI logs), and, when
one file compiles for minutes (ggml-cpu.c at 10%), a line every 30 s saying how long
that step has been going, so a slow compile never reads as a hang.

The last line's step is not what holds a parallel build: with ``-j2`` the other job runs
through the small files and the library's link waits for the big one (the bar sat at
"10% Building C ggml-cpu.c.o", then at 19% on a link, for minutes). ``BuildProgress``
keeps the objects started whose target is not built yet (``Built target X`` ends them
all), and once the percent has not moved for a while the bar and the heartbeat name the
oldest of them and how long it has been compiling: what the build is waiting on.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import IO

from crossover.errors import EngineError

_PERCENT = re.compile(r"^\[\s*(\d{1,3})%\]\s*(.*)$")
_NINJA = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)$")


def parse_progress(line: str) -> tuple[float, str] | None:
    """Percent done (0..100) and the step's text from one build output line, or None."""
    if m := _PERCENT.match(line):
        return float(m.group(1)), m.group(2)
    if m := _NINJA.match(line):
        total = int(m.group(2))
        return (100.0 * int(m.group(1)) / total if total else 0.0), m.group(3)
    return None


_OBJECT = re.compile(r"^Building \S+ object (?:.*/)?CMakeFiles/([^/]+)\.dir/(?:.*/)?([^/]+)$")
_BUILT = re.compile(r"^Built target (\S+)$")
#: the percent unmoved this long: say what the build waits on
WAITING_AFTER_S = 20.0


class BuildProgress:
    """Where a build is, from its output lines (``feed``): the percent, the last step,
    and the objects started whose target is not built yet."""

    def __init__(self) -> None:
        self.percent = 0.0
        self.step = ""
        self.moved_at: float | None = None
        #: object -> (its target, when its compile started)
        self.pending: dict[str, tuple[str, float]] = {}

    def feed(self, line: str, now: float) -> bool:
        """Take one output line seen at ``now`` (monotonic seconds); True if it was a
        progress line."""
        parsed = parse_progress(line.rstrip())
        if parsed is None:
            return False
        percent, step = parsed
        if percent != self.percent or self.moved_at is None:
            self.moved_at = now
        self.percent, self.step = percent, short_step(step)
        if m := _OBJECT.match(step):
            self.pending[m.group(2)] = (m.group(1), now)
        elif m := _BUILT.match(step):
            done = m.group(1)
            self.pending = {k: v for k, v in self.pending.items() if v[0] != done}
        return True

    def waiting(self, now: float) -> str | None:
        """``ggml-cpu.c.o for 2 min 10 s``: the oldest compile whose target is not built,
        once the percent has not moved for ``WAITING_AFTER_S``; else None."""
        if not self.pending or self.moved_at is None or now - self.moved_at < WAITING_AFTER_S:
            return None
        name, (_, started) = min(self.pending.items(), key=lambda kv: kv[1][1])
        return f"{name} for {_secs(now - started)}"

    def describe(self, now: float) -> str:
        """The step, and what the build waits on when it has not moved for a while."""
        wait = self.waiting(now)
        return f"{self.step}; waiting on {wait}" if wait else self.step


def _secs(s: float) -> str:
    n = int(s)
    return f"{n // 60} min {n % 60:02d} s" if n >= 60 else f"{n} s"


def short_step(step: str) -> str:
    """``Building CXX object common/CMakeFiles/x.dir/a/b.cpp.o`` -> ``Building CXX b.cpp.o``."""
    words = step.replace(" object ", " ").split()
    if words and "/" in words[-1]:
        words[-1] = words[-1].rsplit("/", 1)[1]
    return " ".join(words)[:60]


#: seconds without a new step before a plain (non-terminal) build says it is still going
HEARTBEAT_S = 30.0
#: how often a terminal's bar is refreshed while no line comes
TICK_S = 5.0


def _lines(stream: IO[str], every_s: float) -> Iterator[str | None]:
    """The stream's lines, and None each ``every_s`` seconds that none came (a reader
    thread: a compile of one big file prints nothing for minutes)."""
    q: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            q.put(line)
        q.put(None)

    threading.Thread(target=read, daemon=True).start()
    while True:
        try:
            line = q.get(timeout=every_s)
        except queue.Empty:
            yield None
            continue
        if line is None:
            return
        yield line


def _ago(t0: float) -> str:
    s = int(time.monotonic() - t0)
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def _tail(log: IO[str]) -> str:
    log.flush()
    try:
        with open(log.name, encoding="utf-8", errors="replace") as fh:
            return "".join(fh.readlines()[-40:])
    except OSError:
        return ""


def run_build_command(cmd: list[str], log: IO[str], title: str, show: bool, percent: bool) -> None:
    """Run ``cmd`` (argument list), appending output to ``log``; EngineError on failure."""
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    assert proc.stdout is not None
    if show and console.is_terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("[dim]{task.fields[step]}"),
        )
        state = BuildProgress()
        with Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task(title, total=100.0 if percent else None, step="")
            for line in _lines(proc.stdout, TICK_S):
                now = time.monotonic()
                if line is not None:
                    log.write(line)
                    if not state.feed(line, now):
                        continue
                bar.update(task, completed=state.percent, step=state.describe(now)[:90])
            if proc.wait() == 0 and percent:
                bar.update(task, completed=100.0, step="done")
    else:
        if show:
            console.print(f"{title} ...")
        last_step = -1
        plain = BuildProgress()
        since = time.monotonic()
        for got in _lines(proc.stdout, HEARTBEAT_S):
            now = time.monotonic()
            if got is None:  # nothing said for a while: a long compile, not a hang
                if show and percent:
                    wait = plain.waiting(now)
                    said = f"waiting on {wait}" if wait else f"still compiling, {_ago(since)}"
                    console.print(f"  {plain.percent:3.0f}%  {plain.step} ({said})")
                continue
            log.write(got)
            if not plain.feed(got, now):
                continue
            since = now
            at = plain.percent
            if show and percent and int(at) // 10 > last_step:
                last_step = int(at) // 10
                console.print(f"  {int(at):3d}%  {plain.step}")
        proc.wait()
    log.flush()
    if proc.returncode != 0:
        raise EngineError(
            f"{title} failed (exit {proc.returncode}); full log: {log.name}", _tail(log)
        )
