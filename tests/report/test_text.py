"""The sweep's terminal text (crossover.report.text): missing is shown as missing (a metric a run
did not produce is ``—``, never ``0``), client-made percentiles marked, kept runs one line
per target."""

from __future__ import annotations

from types import SimpleNamespace

from crossover.report.text import level_line


def _summary(**values: float | None) -> SimpleNamespace:
    return SimpleNamespace(
        verdict="invalid",
        load=SimpleNamespace(mode="concurrency"),
        throughput=SimpleNamespace(
            total_tokens_per_s=values.get("tp"), output_tokens_per_s=values.get("out")
        ),
        ttft_ms=SimpleNamespace(p50=values.get("ttft")),
        itl_ms=SimpleNamespace(p50=values.get("itl")),
    )


def test_missing_metrics_are_dashes_not_zeros() -> None:
    line = level_line("a", 4, 0, _summary(), "done")
    assert "total — tok/s" in line and "out — tok/s" in line
    assert "TTFT p50 — ms" in line and "ITL p50 — ms" in line
    assert " 0 " not in line and "0.0" not in line


def test_present_metrics_are_printed() -> None:
    line = level_line("a", 4, 1, _summary(tp=1234.4, out=99.0, ttft=12.34, itl=1.234), "failed")
    assert "total 1,234 tok/s" in line and "out 99 tok/s" in line
    assert "TTFT p50 12.3 ms" in line and "ITL p50 1.23 ms" in line
    assert "(failed)" in line


def test_client_made_percentiles_are_marked() -> None:
    s = _summary(tp=10.0, out=5.0, ttft=12.0, itl=1.5)
    s.client_made = ["itl_ms.p50", "itl_ms.p99"]
    line = level_line("a", 4, 0, s, "done")
    assert "ITL p50 1.50* ms" in line and "TTFT p50 12.0 ms" in line
    # the tails are said once, after the table (client_made_line), not on every level
    assert "client-made" not in line and "p99" not in line


def _sweep(made: list[list[str]]) -> object:
    from crossover.analysis.schema import SweepFile

    from ..analysis.synthetic_servers import summary

    runs = []
    for i, cm in enumerate(made):
        s = {**summary(total=100.0, ttft_ms=5.0, itl_ms=1.0, concurrency=2**i), "client_made": cm}
        runs.append({"target": "a", "concurrency": 2**i, "repeat": 0, "summary": s})
    return SweepFile.model_validate({"runs": runs})


def test_client_made_tails_are_said_once_with_their_count_and_cure() -> None:
    from rich.console import Console

    from crossover.report.text import client_made_line, comparison_table

    sweep = _sweep([["itl_ms.p99", "ttft_ms.p99"], ["itl_ms.p99"], []])
    line = client_made_line(sweep)  # type: ignore[arg-type]
    assert line is not None
    assert line.startswith("client-made tails in 2 of 3 runs: itl_ms.p99 (2), ttft_ms.p99 (1)")
    assert "--workers" in line
    assert client_made_line(_sweep([[], []])) is None  # type: ignore[arg-type]
    # the table's footnote about * only when a cell carries one
    console = Console(width=200, record=True)
    console.print(comparison_table(sweep))  # type: ignore[arg-type]
    assert "within reach" not in console.export_text()
    console = Console(width=200, record=True)
    console.print(comparison_table(_sweep([["itl_ms.p50"]])))  # type: ignore[arg-type]
    text = " ".join(console.export_text().split())
    assert "1.0*" in text and "within reach of the client's own event-loop lag" in text


def test_a_sessions_rate_sweep_counts_sessions_per_second() -> None:
    from rich.console import Console

    from crossover.analysis.schema import SweepFile
    from crossover.report.text import comparison_table

    from ..analysis.synthetic_servers import summary

    def sweep(workload: dict[str, object]) -> SweepFile:
        s = summary(total=100.0, ttft_ms=5.0)
        s["load"] = {"mode": "rate", "concurrency": None, "rate_rps": 2.0}
        return SweepFile.model_validate(
            {"runs": [{"target": "a", "rate": 2.0, "summary": s}], "workload": workload}
        )

    with_sessions = sweep({"sessions": "3 turns, think 0 s"})
    assert with_sessions.rate_unit() == "sessions/s"
    assert sweep({}).rate_unit() == "requests/s"
    console = Console(width=200, record=True)
    console.print(comparison_table(with_sessions))
    assert "sessions/s" in console.export_text()


def test_runs_kept_from_before_are_one_line_per_target() -> None:
    """A resumed sweep said "done earlier, kept" once per run (a hundred lines on a big
    grid); now once per target, naming the runs, when the stretch of kept runs ends."""
    from rich.console import Console

    from crossover.report.text import KeptRuns
    from crossover.sweep.config import Level

    console = Console(width=300, record=True)
    kept = KeptRuns(console)
    for c in (1, 4):
        for r in (0, 1):
            kept.add("fast", Level("concurrency", c), r)
    kept.add("batched", Level("concurrency", 1), 0)
    assert console.export_text(clear=False) == ""  # said when the stretch ends
    kept.flush()
    kept.flush()  # nothing twice
    lines = console.export_text().splitlines()
    assert lines == [
        "fast: 4 runs done earlier, kept (c=1 r=0, c=1 r=1, c=4 r=0, c=4 r=1)",
        "batched: 1 run done earlier, kept (c=1 r=0)",
    ]
