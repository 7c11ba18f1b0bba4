"""What a live decision says as it measures (``crossover decide --config``, on stderr):
the sweep's events (:class:`crossover.sweep.driver.SweepEvents`) as lines on a console."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from crossover.measure import Progress
    from crossover.metrics.summary import RunSummary
    from crossover.report.text import KeptRuns
    from crossover.sweep.config import Level
    from crossover.sweep.driver import SweepEvents


#: why each measurement was asked for, by (target, level label, repeat): the decision
#: fills it as it asks (:func:`crossover.decide.live.decide_live`'s ``reasons``), the
#: start line says it
Reasons = dict[tuple[str, str, int], str]


def live_events(console: Console, kept: KeptRuns, reasons: Reasons | None = None) -> SweepEvents:
    """What a live decision says as it measures (on stderr): each level as it starts (a
    level can take minutes on a GPU), with why it is measured where ``reasons`` holds it
    (``vllm c=8 r=1: measuring (first pass) ...``), and as it ends, a sequential level
    that stopped sending marked as the part of its level it is (the same level measured whole later
    prints again); runs done earlier and kept, one line per target as a sweep says them
    (``kept``: flushed before any other line, and by the caller at the end)."""
    from rich.markup import escape

    from crossover.report.text import level_line
    from crossover.sweep.driver import SweepEvents

    planned: dict[tuple[str, str, int], int | None] = {}

    def start(n: str, lv: Level, r: int, progress: Progress) -> None:
        kept.flush()
        planned[(n, lv.label, r)] = progress.total
        why = (reasons or {}).get((n, lv.label, r))
        said = f" ({escape(why)})" if why else ""
        console.print(f"[dim]{escape(n)} {lv.label} r={r}: measuring{said} ...[/]")

    def done(n: str, lv: Level, r: int, s: RunSummary, status: str) -> None:
        kept.flush()
        line = level_line(n, lv.label, r, s, status)
        total = planned.pop((n, lv.label, r), None)
        if status == "done" and total is not None and s.requests.sent < total:
            line += f"  [dim](a part of the level: {s.requests.sent} of {total} requests sent)[/]"
        console.print(line)

    def engine(n: str, msg: str) -> None:
        kept.flush()
        console.print(f"{n}: {msg}", markup=False)

    return SweepEvents(
        on_level_start=start,
        on_level_done=done,
        on_engine=engine,
        on_skip=kept.add,
        on_note=lambda line: console.print(f"[yellow]{escape(line)}[/]"),
    )
