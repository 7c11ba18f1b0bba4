"""Run a build command, log everything, and show its percent lines as progress.

CMake's Makefile generator prints ``[ 42%] Building ...`` and Ninja prints
``[12/200] ...``; either becomes a rich progress bar on a terminal, or one plain
line per 10% step otherwise (``make test`` output stays readable in CI logs).
"""

from __future__ import annotations

import re
import subprocess
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
        for line in proc.stdout:
            log.write(line)
            parsed = parse_progress(line.rstrip())
            if show and percent and parsed is not None and int(parsed[0]) // 10 > last_step:
                last_step = int(parsed[0]) // 10
                console.print(f"  {int(parsed[0]):3d}%  {short_step(parsed[1])}")
        proc.wait()
    log.flush()
    if proc.returncode != 0:
        raise EngineError(
            f"{title} failed (exit {proc.returncode}); full log: {log.name}", _tail(log)
        )
