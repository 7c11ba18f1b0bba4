"""An open-loop level past capacity is flagged overloaded (served well below arrivals),
wherever a sweep shows it: sweep.json, the terminal table and lines, the report."""

from __future__ import annotations

from typing import Any

from crossover.analysis import SweepFile
from crossover.analysis.crossovers import format_overloads, overloaded_levels
from crossover.analysis.overload import open_loop_load
from crossover.metrics.summary import RunSummary

from .synthetic_servers import summary


def rate_summary(
    rate: float, sent: int, window_s: float, duration_s: float, e2e_min_ms: float, **v: Any
) -> dict[str, Any]:
    """A rate level's summary: ``sent`` requests over ``window_s`` (first to last send),
    the last finished ``duration_s`` after the first send."""
    s = summary(**v)
    s["load"] = {"mode": "rate", "concurrency": None, "rate_rps": rate}
    s["requests"] = {"sent": sent, "succeeded": sent, "failed": 0, "matched": sent}
    s["window"] = {"start_s": 0.0, "end_s": window_s, "duration_s": window_s, "steady": True}
    s["duration_s"] = duration_s
    s["e2e_ms"] = {**s["e2e_ms"], "min": e2e_min_ms, "count": sent}
    return s


#: 80 requests/s for 4 s against a server doing 40: the last finishes 8 s after the first send
OVERLOADED = {"rate": 80.0, "sent": 320, "window_s": 4.0, "duration_s": 8.3, "e2e_min_ms": 300.0}
#: 20 requests/s, each taking 0.25 s: done 0.25 s after the last send
STABLE = {"rate": 20.0, "sent": 80, "window_s": 4.0, "duration_s": 4.3, "e2e_min_ms": 230.0}


def test_served_against_arriving() -> None:
    hot = open_loop_load(RunSummary.model_validate(rate_summary(**OVERLOADED)))
    assert hot is not None and hot.overloaded
    assert round(hot.arriving_rps, 1) == 79.8 and round(hot.served_rps, 1) == 39.9
    assert hot.describe() == "served 39.9 of the 79.8 requests/s that arrived (50%)"
    calm = open_loop_load(RunSummary.model_validate(rate_summary(**STABLE)))
    assert calm is not None and not calm.overloaded
    # requests that take longer than the level, at a rate the server keeps up with:
    # nothing completes in the sending window, and the level is still not overloaded
    slow = {**STABLE, "duration_s": 4.0 + 12.6, "e2e_min_ms": 12_500.0}
    found = open_loop_load(RunSummary.model_validate(rate_summary(**slow)))
    assert found is not None and not found.overloaded
    # a closed loop, or too few requests, is not judged
    assert open_loop_load(RunSummary.model_validate(summary())) is None
    few = RunSummary.model_validate(rate_summary(**{**OVERLOADED, "sent": 4}))
    assert open_loop_load(few) is None


def _sweep() -> SweepFile:
    runs = []
    for rep in range(2):
        runs.append({"target": "fast", "rate": 20.0, "repeat": rep,
                     "summary": rate_summary(**STABLE, output=600.0)})  # fmt: skip
        runs.append({"target": "fast", "rate": 80.0, "repeat": rep,
                     "summary": rate_summary(**OVERLOADED, output=1200.0)})  # fmt: skip
        for rate, out in ((20.0, 590.0), (80.0, 2400.0)):
            calm = {**STABLE, "rate": rate, "sent": int(rate * 4), "duration_s": 4.3}
            runs.append({"target": "batched", "rate": rate, "repeat": rep,
                         "summary": rate_summary(**calm, output=out)})  # fmt: skip
    return SweepFile.model_validate({"runs": runs})


def test_sweep_runs_carry_the_flag_and_the_file_keeps_it() -> None:
    sweep = _sweep()
    assert overloaded_levels(sweep) == {"fast": [80.0]}
    text = sweep.to_json()
    assert '"overloaded": true' in text
    again = SweepFile.model_validate_json(text)
    assert [r.overloaded for r in again.runs] == [r.overloaded for r in sweep.runs]
    (line,) = format_overloads(sweep)
    assert line.startswith("fast is overloaded at 80 requests/s; at 80 it served 39.9 of the 79.8")


def test_the_terminal_leads_a_rate_sweep_with_output_and_flags_overload() -> None:
    from rich.console import Console

    from crossover.analysis import analyze_sweep
    from crossover.report.text import comparison_table, ordered_findings, table_caption

    sweep = _sweep()
    assert table_caption(sweep).startswith("output tok/s | done req/s | TTFT p50 ms")
    console = Console(width=200, record=True)
    console.print(comparison_table(sweep))
    table = console.export_text()
    row80 = next(ln for ln in table.splitlines() if ln.strip("│ ").startswith("80"))
    assert "OVERLOADED 1,200" in row80 and "2,400" in row80
    shown = ordered_findings(analyze_sweep(sweep))
    assert shown[0].metric == "output_tokens_per_s"
    assert "total_tokens_per_s" not in {f.metric for f in shown if f.kind != "crossover"}
