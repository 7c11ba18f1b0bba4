"""A run reports its event loop's lag beside the client floor, and keeps it for
``crossover summarize``."""

from __future__ import annotations

from pathlib import Path

from crossover.measure import resummarize
from tests.integration.conftest import calib, run_against


def test_run_reports_loop_lag_and_summarize_keeps_it(tmp_path: Path) -> None:
    out, store = run_against(calib(itl_ms=5.0), tmp_path, output_tokens=24)
    lag = out.summary.client_loop
    assert lag is not None
    # four streams: the probe sleeps 5 ms x 16 / 4 (looplag.probe_interval_s)
    assert lag.interval_ms == 20.0 and lag.workers == 1
    # 16 requests x 24 tokens x 5 ms at concurrency 4: ~0.5 s of load, ~25 wake-ups
    assert lag.samples >= 10
    assert lag.p50_ms is not None and lag.max_ms is not None and lag.max_ms >= lag.p50_ms >= 0
    js = out.summary.to_json_dict()
    assert js["schema"] == "crossover.run/1" and "client_loop" in js and "client_floor" in js
    again = resummarize(store, out.run_id)
    assert again.client_loop == lag
    stored = store.run(out.run_id)
    assert stored is not None and stored.summary is not None
    assert stored.summary["client_loop"]["samples"] == lag.samples
