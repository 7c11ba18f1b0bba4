"""``crossover demo --quick`` for real: llama-server (as ``make engines`` built it) serving
the real Gemma 3 270M on this machine, one slot against eight with 2-token micro-batches.
The result must hold the crossover the demo is about, with its interval on the expected
side: the single slot's TTFT leads at one request, the eight slots' from a few on."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.analysis.schema import SweepFile
from crossover.cli.app import main
from crossover.sweep.demo import DEMO_LEVELS, DEMO_TARGETS

pytestmark = pytest.mark.llamacpp


def test_quick_demo_finds_the_ttft_crossover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    sweep = SweepFile.read(out / "sweep.json")
    assert len(sweep.runs) == 2 * len(DEMO_LEVELS)
    assert all(r.is_valid for r in sweep.runs), [r.problems for r in sweep.runs]
    (x,) = [c for c in sweep.crossovers if c.metric == "ttft_ms.p50"]
    assert (x.below, x.above) == DEMO_TARGETS
    lo, hi = x.interval
    # between the lowest and highest level, the point inside its interval
    assert x.concurrency is not None
    assert DEMO_LEVELS[0] <= lo <= x.concurrency <= hi <= DEMO_LEVELS[-1]
    assert "TTFT p50: 1-slot leads below" in printed
    assert "why: at 1 request 1-slot prefills" in printed
