"""What a live decision says as it measures (``crossover.decide.events``): an engine's
lines as they are (never read as markup), after the runs kept from before; the sweep's
notes (a resume on another machine) said as they come."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rich.console import Console

from crossover.decide.events import live_events
from crossover.report.text import KeptRuns


def test_an_engine_line_is_said_as_it_is_after_the_kept_runs() -> None:
    console = Console(width=300, record=True)
    kept = KeptRuns(console)
    events = live_events(console, kept)
    assert events.on_skip is not None and events.on_engine is not None
    level: Any = SimpleNamespace(label="c=1")
    events.on_skip("fast", level, 0)
    events.on_engine("fast", "healthy [bold]now[/bold] at http://127.0.0.1:8000")
    assert console.export_text().splitlines() == [
        "fast: 1 run done earlier, kept (c=1 r=0)",
        "fast: healthy [bold]now[/bold] at http://127.0.0.1:8000",
    ]


def test_a_note_is_said_whole() -> None:
    console = Console(width=300, record=True)
    events = live_events(console, KeptRuns(console))
    assert events.on_note is not None
    events.on_note("this sweep resumed on another machine: 1x [H100]")
    assert console.export_text() == "this sweep resumed on another machine: 1x [H100]\n"
