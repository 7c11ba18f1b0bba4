"""A sweep on the terminal: a live progress line and one line per finished level while it
runs (``run_live``), the comparison and the crossovers at the end (``print_outcome``,
read with the sweep's tie margin); ``crossover sweep`` and ``crossover demo`` show their
sweeps this way."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crossover.words import plural

if TYPE_CHECKING:  # types only: the functions import what they use when they run
    from collections.abc import Sequence
    from pathlib import Path

    from rich.console import Console

    from crossover.measure import Progress
    from crossover.metrics.summary import RunSummary
    from crossover.sweep.cluster import RayCluster
    from crossover.sweep.config import Level, SweepConfig
    from crossover.sweep.driver import SweepOutcome


async def run_live(
    cfg: SweepConfig,
    out: Path,
    console: Console,
    only: set[str] | None = None,
    redo_invalid: bool = False,
    cluster: RayCluster | None = None,
    redo: dict[str, set[float] | None] | None = None,
    tie_rel: float | None = None,
    command: str = "sweep",
) -> SweepOutcome:
    """Run the sweep with a live progress line and one line per finished level; its
    analysis reads levels with the tie margin ``tie_rel`` (None: the one the sweep was
    measured with, else 0). ``command``: the one running it (sweep, demo), as its
    refusals name their way out."""
    import asyncio
    import contextlib

    from rich.live import Live
    from rich.markup import escape

    from crossover.cli.render import progress_line
    from crossover.report.text import KeptRuns, level_line
    from crossover.sweep.driver import SweepEvents, SweepRunner

    progress_now: list[Progress | None] = [None]
    label = [""]
    kept = KeptRuns(console)

    def start(name: str, level: Level, r: int, progress: Progress) -> None:
        kept.flush()
        progress_now[0], label[0] = progress, f"{name} {level.label} r={r}"

    def engine(name: str, msg: str) -> None:
        kept.flush()
        console.print(f"[cyan]{escape(name)}[/]: {escape(msg)}")

    def refine(new: list[int], left: int) -> None:
        kept.flush()
        console.print(
            f"[cyan]refine[/]: measuring concurrency {', '.join(map(str, new))}, between "
            "levels where a crossover (or an inconclusive sign change) is not yet placed "
            f"within {cfg.refine_width:.0%} of its level ({left} more level(s) left of "
            f"--refine-budget {cfg.refine_budget})"
        )

    def done(name: str, level: Level, r: int, s: RunSummary, status: str) -> None:
        kept.flush()
        console.print(level_line(name, level.label, r, s, status))
        for p in s.problems:
            if p.severity == "error":
                console.print(f"    [red]{p.code}[/]: {escape(p.message)}")

    events = SweepEvents(
        on_level_start=start,
        on_level_done=done,
        on_skip=kept.add,
        on_engine=engine,
        on_refine=refine,
        on_note=lambda line: console.print(f"[yellow]{escape(line)}[/]"),
    )
    runner = SweepRunner(
        cfg,
        out,
        events,
        only=only,
        redo_invalid=redo_invalid,
        cluster=cluster,
        redo=redo,
        tie_rel=tie_rel,
        command=command,
    )
    task = asyncio.ensure_future(runner.run())
    try:
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            while not task.done():
                await asyncio.wait({task}, timeout=0.25)
                p = progress_now[0]
                if p is not None:
                    from rich.text import Text

                    live.update(Text.assemble((label[0] + "  ", "bold"), progress_line(p)))
        return task.result()
    finally:
        kept.flush()
        if not task.done():  # Ctrl-C: let the level mark itself interrupted first
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        runner.close()


def print_outcome(
    outcome: SweepOutcome,
    out: Path,
    console: Console,
    report: bool,
    notes: Sequence[str] = (),
) -> None:
    """The comparison table, the crossovers one per line (then ``notes``, a caller's lines
    on them), where the results are."""
    from rich.markup import escape

    from crossover.cli.common import console as make_console
    from crossover.report.text import (
        client_made_line,
        comparison_table,
        findings_lines,
        outlier_lines,
        table_caption,
    )

    stdout = make_console()
    others = ", ".join(f"{escape(t)} {n}" for t, n in outcome.left_out.items())
    stdout.print(
        f"\n[bold]Sweep[/] {out}: {plural(outcome.ran, 'run')} measured, {outcome.skipped} kept "
        "from before" + (f"; in the table as before, not run (--only): {others}" if others else "")
    )
    stdout.print(table_caption(outcome.sweep))
    stdout.print(comparison_table(outcome.sweep))
    for line in outlier_lines(outcome.sweep):
        stdout.print(f"[yellow]{escape(line)}[/]")
    made = client_made_line(outcome.sweep)
    if made is not None:
        stdout.print(f"[yellow]{escape(made)}[/]")
    margin = outcome.sweep.tie_margin or 0.0
    for line in findings_lines(outcome.sweep, outcome.findings, tie_rel=margin, sweep_dir=out):
        stdout.print(line)
    for note in notes:
        stdout.print(escape(note))
    for line in outcome.failed_levels:
        stdout.print(f"[red]failed level[/] {escape(line)}")
    stdout.print(f"results: {out / 'sweep.json'} (database {out / 'sweep.db'})")
    if report:
        try:
            from crossover.report.html import write_report

            path = write_report(out, outcome.sweep)
            stdout.print(f"report: {path}")
        except Exception as exc:  # the sweep's results stand without the report
            console.print(f"[yellow]report not written: {escape(str(exc))}[/]")
