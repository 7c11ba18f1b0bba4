"""What a live ``crossover decide`` says while it measures: each level as it starts, and a
sequential level that stopped sending marked as the part of its level it is (the same
level measured whole later prints again under the same name)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rich.console import Console

from crossover.cli.decide import live_events
from crossover.measure import Progress
from crossover.metrics.summary import RunSummary

from ..analysis.synthetic_servers import summary


def _summary(sent: int) -> RunSummary:
    s = RunSummary.model_validate(summary(total=1000.0, ttft_ms=20.0, itl_ms=5.0))
    s.requests.sent = sent
    return s


def _said(events: Any, console: Console, sent: int, planned: int) -> str:
    level: Any = SimpleNamespace(label="c=4")
    assert events.on_level_start is not None and events.on_level_done is not None
    events.on_level_start("batched", level, 0, Progress(total=planned))
    events.on_level_done("batched", level, 0, _summary(sent), "done")
    return console.export_text()


def test_a_level_says_it_starts_and_a_part_says_it_is_one() -> None:
    console = Console(width=300, record=True)
    text = _said(live_events(console), console, 7, 16)
    lines = text.splitlines()
    assert lines[0] == "batched c=4 r=0: measuring ..."
    assert lines[1].startswith("batched c=4 r=0  valid")
    assert lines[1].endswith("(a part of the level: 7 of 16 requests sent)")


def test_a_whole_level_is_not_called_a_part() -> None:
    console = Console(width=300, record=True)
    assert "a part" not in _said(live_events(console), console, 16, 16)
