"""Missing is shown as missing: a metric a run did not produce is ``—``, never ``0``."""

from __future__ import annotations

from types import SimpleNamespace

from crossover.cli.sweep import level_line


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
