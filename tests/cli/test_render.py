"""The run summary's load line: an open loop's figure in parentheses is the arrivals and
the requests in flight, each named (it read ``rate 5 requests/s (achieved 0.46)``, which
reads as 0.46 requests/s achieved)."""

from __future__ import annotations

from rich.console import Console

from crossover.cli.render import summary_table
from crossover.metrics.summary import RunSummary

from ..analysis.synthetic_servers import summary


def _load_line(s: RunSummary) -> str:
    console = Console(width=400, record=True)
    console.print(summary_table(s))
    text = console.export_text()
    return next(ln for ln in text.splitlines() if "steady window" in ln)


def test_an_open_loop_names_its_arrivals_and_what_was_in_flight() -> None:
    s = RunSummary.model_validate(summary(total=1000.0, ttft_ms=20.0, itl_ms=5.0))
    s.load.mode, s.load.concurrency, s.load.rate_rps = "rate", None, 5.0
    s.load.arriving_rps, s.load.achieved_concurrency = 5.52, 0.46
    line = _load_line(s)
    assert line.startswith("rate 5 requests/s (5.52/s arrived, 0.46 in flight on average)")
    assert "achieved" not in line


def test_a_closed_loop_keeps_its_achieved_concurrency() -> None:
    s = RunSummary.model_validate(summary(total=1000.0, ttft_ms=20.0, itl_ms=5.0))
    s.load.mode, s.load.concurrency, s.load.achieved_concurrency = "concurrency", 4, 3.98
    assert _load_line(s).startswith("concurrency 4 (achieved 3.98)")


def test_one_turn_reads_as_one_turn() -> None:
    """The shape stored with a run says ``1 turns`` (kept as stored); the summary says
    ``1 turn``."""
    s = RunSummary.model_validate(summary(total=1000.0, ttft_ms=20.0, itl_ms=5.0))
    s.workload.shape = {"sessions": "1 turns, think 0 s"}
    console = Console(width=400, record=True)
    console.print(summary_table(s))
    line = next(ln for ln in console.export_text().splitlines() if ln.startswith("workload:"))
    assert line.strip() == "workload: sessions of 1 turn, think 0 s"


def test_the_run_summary_marks_client_made_percentiles() -> None:
    from rich.console import Console

    from crossover.cli.render import summary_table
    from crossover.metrics.run import RunContext, summarize
    from crossover.metrics.summary import EngineInfo, LoopLag
    from crossover.records.model import RequestRecord

    ms = 1_000_000
    recs = [
        RequestRecord(
            index=i,
            expected_output_tokens=4,
            t_send_ns=i * 100 * ms,
            t_first_ns=i * 100 * ms + 10 * ms,
            t_last_ns=i * 100 * ms + 40 * ms,
            t_done_ns=i * 100 * ms + 41 * ms,
            chunk_arrival_ns=[i * 100 * ms + k * 10 * ms for k in range(1, 5)],
            chunk_chars=[1] * 4,
            completion_tokens=4,
            count_source="usage",
            finish_reason="length",
            saw_done=True,
        )
        for i in range(3)
    ]
    ctx = RunContext(
        mode="concurrency",
        concurrency=1,
        output_tokens=4,
        endpoint="completions",
        engine=EngineInfo(name="x", url="http://h", model="m"),
        started_at="now",
    )
    lag = LoopLag(interval_ms=5, samples=100, p50_ms=1.0, p90_ms=3.0, p95_ms=4.0, p99_ms=9.0)
    s = summarize(recs, ctx, loop=lag)
    # p50: 1 ms of lag is the timer's resolution; p90 and above: 2-8 ms against 10 ms
    assert {"itl_ms.p90", "itl_ms.p99", "ttft_ms.p99"} <= set(s.client_made)
    assert not {"itl_ms.p50", "ttft_ms.p50", "tpot_ms.p50"} & set(s.client_made)
    console = Console(width=200, record=True)
    console.print(summary_table(s))
    text = console.export_text()
    assert "10.00*" in text  # ITL p90
    assert "client_made_percentiles" in text and "--workers" in text
