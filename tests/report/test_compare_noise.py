"""``crossover compare`` calls a change better or worse only when the 95% interval of the
difference excludes zero: the repeats' spread (Welch) when both sides have repeats, the
documented 3% noise floor when a side has none (and it says so); otherwise "no
significant change". A concurrency sweep and a rate sweep are not comparable."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from crossover.analysis import SweepFile
from crossover.cli.app import main
from crossover.metrics.summary import RunSummary
from crossover.report.compare import compare_runs, compare_sweeps

from ..analysis.synthetic_servers import summary


def _sweep(ttfts: dict[int, tuple[float, ...]], axis: str = "concurrency") -> SweepFile:
    runs: list[dict[str, Any]] = []
    for level, values in ttfts.items():
        for rep, v in enumerate(values):
            s = summary(total=1000.0 * level, ttft_ms=v, itl_ms=5.0)
            if axis == "rate":
                s["load"] = {"mode": "rate", "concurrency": None, "rate_rps": float(level)}
            runs.append({"target": "A", axis: level, "repeat": rep, "summary": s})
    return SweepFile.model_validate({"runs": runs, "workload": {"output_tokens": 32}})


def _row(cmp: Any, group: str, label: str) -> Any:
    return next(r for r in cmp.rows if r.group == group and r.metric.label == label)


def test_noise_within_the_repeats_spread_is_no_significant_change() -> None:
    """Two sweeps of the same servers: their TTFT p50 means differ by 4%, well inside the
    spread of their repeats (today: '0.960x better')."""
    before = _sweep({4: (20.0, 22.0)})
    after = _sweep({4: (19.0, 21.32)})
    row = _row(compare_sweeps(before, after), "A c=4", "TTFT p50 ms")
    assert f"{row.ratio:.3f}" == "0.960"
    assert row.change == "no significant change"
    lo, hi = row.ratio_interval
    assert lo < 1.0 < hi


def test_a_change_beyond_the_spread_is_named() -> None:
    before = _sweep({4: (20.0, 20.2, 19.9)})
    after = _sweep({4: (25.0, 25.1, 24.9)})
    cmp = compare_sweeps(before, after)
    assert _row(cmp, "A c=4", "TTFT p50 ms").change == "worse"
    assert any("intervals from their spread (Welch)" in n for n in cmp.notes)
    # their repeats shared an engine start: the note says what the interval leaves out
    assert any("start-to-start variation is not in them" in n for n in cmp.notes)


def test_repeats_each_on_their_own_start_are_said_so() -> None:
    """A sweep measured with ``restart_between_repeats`` (its workload says so): its
    intervals hold the start-to-start variation, and the note says that instead."""
    before = _sweep({4: (20.0, 20.2, 19.9)})
    after = _sweep({4: (25.0, 25.1, 24.9)})
    after.workload = {**(after.workload or {}), "restart_between_repeats": True}
    notes = compare_sweeps(before, after).notes
    assert any(n.endswith("each repeat on its own engine start") for n in notes), notes
    assert sum("start-to-start variation is not in them" in n for n in notes) == 1, notes


def test_single_runs_say_they_have_no_spread() -> None:
    base = RunSummary.model_validate(summary(total=1000.0, ttft_ms=20.0, itl_ms=5.0))
    same = compare_runs(base, base)
    assert {r.change for r in same.rows if r.ratio is not None} == {"no significant change"}
    assert any("no spread of their own" in n and "3%" in n for n in same.notes)
    near = RunSummary.model_validate(summary(total=975.0, ttft_ms=20.5, itl_ms=5.0))
    cmp = compare_runs(base, near)
    assert _row(cmp, "run", "total tok/s").change == "no significant change"  # 0.975x
    far = RunSummary.model_validate(summary(total=678.0, ttft_ms=39.0, itl_ms=5.0))
    cmp = compare_runs(base, far)
    assert _row(cmp, "run", "total tok/s").change == "worse"
    assert _row(cmp, "run", "TTFT p50 ms").change == "worse"


def test_a_concurrency_sweep_and_a_rate_sweep_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closed, opened = tmp_path / "closed", tmp_path / "open"
    for d, s in ((closed, _sweep({4: (20.0,)})), (opened, _sweep({4: (20.0,)}, axis="rate"))):
        d.mkdir()
        s.write(d / "sweep.json")
    assert main(["compare", str(closed), str(opened)]) == 2
    assert "a concurrency sweep vs a rate sweep" in capsys.readouterr().err
    assert main(["compare", str(opened), str(opened)]) == 0
    out = capsys.readouterr().out
    assert "A rate=4 " in out and "c=4.0" not in out  # a rate level, named as one
    assert "output tok/s" in out


def test_a_closed_loop_run_and_an_open_loop_run_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = summary(total=1000.0, ttft_ms=20.0)
    b = copy.deepcopy(a)
    b["load"] = {"mode": "rate", "concurrency": None, "rate_rps": 4.0}
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    assert "a concurrency run vs a rate run" in capsys.readouterr().err


def test_a_wide_ratio_interval_stays_positive_and_reads_unambiguously() -> None:
    """Two noisy repeats a side (today: '-0.608-2.792x', a linear interval crossing zero
    written with a hyphen between): the log-space interval is positive, holds the ratio,
    and its two ends are written apart."""
    before = _sweep({4: (10.0, 30.0)})
    after = _sweep({4: (8.0, 40.0)})
    row = _row(compare_sweeps(before, after), "A c=4", "TTFT p50 ms")
    lo, hi = row.ratio_interval
    assert 0.0 < lo < row.ratio < hi
    assert abs(math.log(row.ratio) - (math.log(lo) + math.log(hi)) / 2) < 1e-9
    cell = row.cells()[5]
    assert cell.startswith("[") and cell.endswith("x]") and ", " in cell
    assert row.change == "no significant change"


def test_a_runs_note_says_its_load_without_placeholders() -> None:
    """Each run's note names the engine, the model and the load it ran: a closed loop's
    concurrency, an open loop's rate, no ``-`` for what does not apply (was: ``openai -,
    model calib, concurrency 4, rate - rps``)."""
    closed = RunSummary.model_validate(summary(total=1000.0, ttft_ms=20.0, itl_ms=5.0))
    closed.load.mode, closed.load.concurrency, closed.load.rate_rps = "concurrency", 4, None
    closed.engine.version = None
    opened = closed.model_copy(deep=True)
    opened.load.mode, opened.load.concurrency, opened.load.rate_rps = "rate", None, 5.0
    opened.engine.version = "0.26.0"
    notes = compare_runs(closed, opened, "a.json", "b.json").notes
    name, model = closed.engine.name, closed.engine.model
    assert f"a.json: {name}, model {model}, closed loop, concurrency 4" in notes
    assert f"b.json: {name} 0.26.0, model {model}, open loop, 5 requests/s" in notes
    assert not any(" - " in n or "rps" in n for n in notes)
