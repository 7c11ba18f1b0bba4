"""Run a build command, log everything, and show its percent lines as progress.

CMake's Makefile generator prints ``[ 42%] Building ...`` and Ninja prints
``[12/200] ...``; either becomes a rich progress bar on a terminal, or one plain
line per 10% step otherwise (``make test`` output stays readable in CI logs), and, when
one file compiles for minutes (ggml-cpu.c at 10%), a line every 30 s saying how long
that step has been going, so a slow compile never reads as a hang.
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


def short_step(step: str) -> str:
    """``Building CXX object common/CMakeFiles/x.dir/a/b.cpp.o`` -> ``Building CXX b.cpp.o``."""
    words = step.replace(" object ", " ").split()
    if words and "/" in words[-1]:
        words[-1] = words[-1].rsplit("/", 1)[1]
    return " ".join(words)[:60]


#: seconds without a new step before a plain (non-terminal) build says it is still going
HEARTBEAT_S = 30.0


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
        with Progress(*columns, console=console, transient=False) as bar:
            task = bar.add_task(title, total=100.0 if percent else None, step="")
            for line in proc.stdout:
                log.write(line)
                parsed = parse_progress(line.rstrip())
                if parsed is not None:
                    bar.update(task, completed=parsed[0], step=short_step(parsed[1]))
            if proc.wait() == 0 and percent:
                bar.update(task, completed=100.0, step="done")
    else:
        if show:
            console.print(f"{title} ...")
        last_step = -1
        at, step, since = 0.0, "", time.monotonic()
        for got in _lines(proc.stdout, HEARTBEAT_S):
            if got is None:  # nothing said for a while: a long compile, not a hang
                if show and percent:
                    console.print(f"  {at:3.0f}%  {step} (still compiling, {_ago(since)})")
                continue
            log.write(got)
            parsed = parse_progress(got.rstrip())
            if parsed is None:
                continue
            at, step, since = parsed[0], short_step(parsed[1]), time.monotonic()
            if show and percent and int(at) // 10 > last_step:
                last_step = int(at) // 10
                console.print(f"  {int(at):3d}%  {step}")
        proc.wait()
    log.flush()
    if proc.returncode != 0:
        raise EngineError(
            f"{title} failed (exit {proc.returncode}); full log: {log.name}", _tail(log)
        )
