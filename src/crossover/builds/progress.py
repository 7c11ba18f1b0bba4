"""Run a build command, log everything, and show its real progress.

CMake's Makefile generator prints ``[ 42%] Building ...`` and Ninja prints
``[12/200] ...``; either becomes a rich progress bar on a terminal, or one plain
line per 10% step otherwise (``make test`` output stays readable in CI logs), and a line
every 30 s while nothing is printed (one file compiles for minutes), so a slow compile
never reads as a hang.

The Makefile generator's percent is not the build's: with ``-j2`` on 2 cores it sat at
"10% Building C ggml-cpu.c.o" for minutes while the other job went through the small files.
Given the configured tree's ``BuildPlan`` (every object file the target needs), the
progress is the objects compiled out of the total (``62/180 objects``), with the time
elapsed and an estimate of what is left at the rate so far; Ninja's ``[N/M]`` is the same
count. ``BuildProgress`` also keeps the objects started whose target is not built yet
(``Built target X`` ends them all) and names the oldest, the compile the build waits on.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import IO

from crossover.builds.plan import BuildPlan, estimate_left_s
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
    """Where a build is, from its output lines (``feed``) and, given its ``plan``, the
    object files on disk (``refresh``): the objects done out of the total, the percent,
    the last step, and the objects started whose target is not built yet."""

    def __init__(self, plan: BuildPlan | None = None, started: float | None = None) -> None:
        self.plan = plan
        self.started = started
        self.cmake_percent = 0.0
        self.step = ""
        self.moved_at: float | None = None
        #: (done, total) compile steps: the plan's objects on disk, or Ninja's [N/M]
        self.count: tuple[int, int] | None = None
        self._done_at_start = plan.done() if plan is not None else 0
        #: object -> (its target, when its compile started)
        self.pending: dict[str, tuple[str, float]] = {}
        if plan is not None:
            self.count = (self._done_at_start, plan.total)

    @property
    def percent(self) -> float:
        """Percent done: the objects compiled out of the total where they are known, else
        cmake's own percent."""
        if self.count is not None and self.count[1]:
            return 100.0 * self.count[0] / self.count[1]
        return self.cmake_percent

    def refresh(self) -> None:
        """Count the plan's objects on disk again (no plan: nothing to count)."""
        if self.plan is not None:
            self.count = (self.plan.done(), self.plan.total)

    def feed(self, line: str, now: float) -> bool:
        """Take one output line seen at ``now`` (monotonic seconds); True if it was a
        progress line."""
        stripped = line.rstrip()
        parsed = parse_progress(stripped)
        if parsed is None:
            return False
        if self.started is None:
            self.started = now
        if self.plan is None and (m := _NINJA.match(stripped)):
            self.count = (int(m.group(1)), int(m.group(2)))
        percent, step = parsed
        if percent != self.cmake_percent or self.moved_at is None:
            self.moved_at = now
        self.cmake_percent, self.step = percent, short_step(step)
        if m := _OBJECT.match(step):
            self.pending[m.group(2)] = (m.group(1), now)
        elif m := _BUILT.match(step):
            done = m.group(1)
            self.pending = {k: v for k, v in self.pending.items() if v[0] != done}
        self.refresh()
        return True

    def waiting(self, now: float) -> str | None:
        """``ggml-cpu.c.o for 2 min 10 s``: the oldest compile whose target is not built,
        once the output has not moved for ``WAITING_AFTER_S``; else None."""
        if not self.pending or self.moved_at is None or now - self.moved_at < WAITING_AFTER_S:
            return None
        name, (_, started) = min(self.pending.items(), key=lambda kv: kv[1][1])
        return f"{name} for {_secs(now - started)}"

    def counted(self, now: float, elapsed: bool = True) -> str | None:
        """``62/180 objects, 2 min 10 s, about 4 min left``, where the count is known
        (``elapsed=False``: without the time so far, which a bar shows itself)."""
        if self.count is None:
            return None
        done, total = self.count
        text = f"{done}/{total} {'objects' if self.plan is not None else 'steps'}"
        if self.started is None:
            return text
        so_far = now - self.started
        if elapsed:
            text += f", {_secs(so_far)}"
        left = estimate_left_s(done, self._done_at_start, total, so_far)
        return text + (f", about {_secs(left)} left" if left else "")

    def describe(self, now: float, elapsed: bool = True) -> str:
        """The count with elapsed time and estimate (or the last step, when the count is
        not known), and what the build waits on when the output has not moved for a while."""
        wait = self.waiting(now)
        head = self.counted(now, elapsed) or self.step
        return f"{head}; waiting on {wait}" if wait else head


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


def _tail(log: IO[str]) -> str:
    log.flush()
    try:
        with open(log.name, encoding="utf-8", errors="replace") as fh:
            return "".join(fh.readlines()[-40:])
    except OSError:
        return ""


def heartbeat_line(state: BuildProgress, now: float, quiet_since: float) -> str:
    """The plain line said when nothing was printed for ``HEARTBEAT_S``: the count (or the
    last step) and what the build waits on."""
    wait = state.waiting(now)
    said = f"waiting on {wait}" if wait else f"still compiling, {_secs(now - quiet_since)}"
    counted = state.counted(now)
    head = f"{counted}; " if counted else f"{state.step} ("
    return f"  {state.percent:3.0f}%  {head}{said}" + ("" if counted else ")")


def step_line(state: BuildProgress, now: float) -> str:
    """The plain line said at each 10% step: the percent, the step, and the count."""
    counted = state.counted(now)
    return f"  {int(state.percent):3d}%  {state.step}" + (f" ({counted})" if counted else "")


def run_build_command(
    cmd: list[str],
    log: IO[str],
    title: str,
    show: bool,
    percent: bool,
    plan: BuildPlan | None = None,
) -> None:
    """Run ``cmd`` (argument list), appending output to ``log``; EngineError on failure.
    ``plan``: the object files the build will produce, counted as they appear."""
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    assert proc.stdout is not None
    state = BuildProgress(plan, time.monotonic())
    if show and console.is_terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("[dim]{task.fields[step]}"),
        )
        with Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task(title, total=100.0 if percent else None, step="")
            for line in _lines(proc.stdout, TICK_S):
                now = time.monotonic()
                if line is not None:
                    log.write(line)
                    if not state.feed(line, now):
                        continue
                else:
                    state.refresh()
                bar.update(
                    task, completed=state.percent, step=state.describe(now, elapsed=False)[:90]
                )
            if proc.wait() == 0 and percent:
                bar.update(task, completed=100.0, step="done")
    else:
        if show:
            console.print(f"{title} ...")
        last_step = -1
        since = time.monotonic()
        for got in _lines(proc.stdout, HEARTBEAT_S):
            now = time.monotonic()
            if got is None:  # nothing said for a while: a long compile, not a hang
                if show and percent:
                    state.refresh()
                    console.print(heartbeat_line(state, now, since))
                continue
            log.write(got)
            if not state.feed(got, now):
                continue
            since = now
            if show and percent and int(state.percent) // 10 > last_step:
                last_step = int(state.percent) // 10
                console.print(step_line(state, now))
        proc.wait()
        if show and percent and proc.returncode == 0 and last_step < 10:
            # the lines are read as they come and the last ones may say less than was
            # built: a finished build's last word is its whole count
            state.refresh()
            if int(state.percent) // 10 > last_step:
                console.print(step_line(state, time.monotonic()))
    log.flush()
    if proc.returncode != 0:
        raise EngineError(
            f"{title} failed (exit {proc.returncode}); full log: {log.name}", _tail(log)
        )
