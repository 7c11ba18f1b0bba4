"""The report draws a crossover where its curves cross (the analysis and the chart
interpolate alike), every list rounds a crossover's point the same way, and the terminal
does not mark crossovers with a failure-like cross."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.lines import Line2D

from crossover.analysis import SweepFile, analyze_sweep, format_crossover
from crossover.analysis.crossovers import Finding
from crossover.report.charts import COLORS, crossover_label, throughput_axes

from ..analysis.synthetic_servers import summary

#: the README's two calibration servers: fast leads at 4, batched at 16 (total tok/s)
TOTALS = {"fast": {1: 2786, 4: 5887, 16: 8147, 32: 8704}, "batched": {1: 1019, 4: 3993, 16: 14751, 32: 26741}}  # fmt: skip


def _sweep() -> SweepFile:
    runs: list[dict[str, Any]] = []
    for name, by_level in TOTALS.items():
        for c, v in by_level.items():
            for rep, k in enumerate((0.995, 1.005)):
                runs.append({"target": name, "concurrency": c, "repeat": rep,
                             "summary": summary(total=v * k)})  # fmt: skip
    return SweepFile.model_validate({"runs": runs})


def _crossing(a: Line2D, b: Line2D) -> float:
    xa, ya = (np.asarray(v, dtype=float) for v in a.get_data())
    xb, yb = (np.asarray(v, dtype=float) for v in b.get_data())
    assert np.allclose(xa, xb)
    d = ya - yb
    (k,) = np.nonzero(np.sign(d[:-1]) * np.sign(d[1:]) < 0)[0]
    # between two drawn points, on the log2 axis
    t = d[k] / (d[k] - d[k + 1])
    return float(2 ** ((1 - t) * np.log2(xa[k]) + t * np.log2(xa[k + 1])))


def test_the_dashed_line_is_where_the_drawn_curves_cross() -> None:
    sweep = _sweep()
    findings = analyze_sweep(sweep)
    (x,) = [f for f in findings if f.kind == "crossover" and f.metric == "total_tokens_per_s"]
    _fig, ax = throughput_axes(sweep, findings)
    (dashed,) = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    at = float(np.asarray(dashed.get_xdata(), dtype=float)[0])
    assert at == x.concurrency
    curves = {ln.get_color(): ln for ln in ax.get_lines() if len(np.asarray(ln.get_xdata())) > 10}
    crossing = _crossing(curves[COLORS[0]], curves[COLORS[1]])
    # today the line sat at 6.9 while the drawn segments crossed near 5.5
    assert abs(crossing - at) / at < 0.01, (crossing, at)


def test_one_rounding_for_a_point_everywhere() -> None:
    f = Finding(
        kind="crossover", metric="tpot_ms.p50", a="A", b="B", levels=(4, 8), below="A",
        above="B", concurrency=6.2504, interval=(5.95, 6.6504), bracket=(4, 8),
    )  # fmt: skip
    recorded = f.to_schema()
    assert recorded is not None
    live, stored = format_crossover(f), format_crossover(recorded)
    assert live == stored == "TPOT p50: A leads below 6.3 concurrent requests (6.0-6.7), B above"
    assert crossover_label(f).endswith("at 6.3")


def test_the_terminal_lists_crossovers_under_a_heading_without_a_cross(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rich.console import Console

    from crossover.cli.sweep import print_outcome
    from crossover.sweep.driver import SweepOutcome

    sweep = _sweep()
    outcome = SweepOutcome(sweep, analyze_sweep(sweep), 16, 0)
    print_outcome(outcome, tmp_path, Console(stderr=True), False)
    printed = capsys.readouterr().out.splitlines()
    assert "✕" not in "\n".join(printed)
    head = printed.index("crossovers (who leads below and above the point; its interval):")
    assert printed[head + 1].startswith("  total tokens/s: fast leads below 6.9 concurrent")
