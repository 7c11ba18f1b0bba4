"""``--workers auto``: processes from the stream count and a measured event-loop lag."""

from __future__ import annotations

import pytest

from crossover.load.looplag import idle_lag_ms
from crossover.load.sizing import FEW_STREAMS, auto_workers_here, workers_for
from crossover.load.workers import LAG_BUDGET_MS, STREAMS_PER_WORKER, auto_workers


@pytest.mark.parametrize(
    ("streams", "cores", "lag_ms", "expected"),
    [
        (None, 16, 5.0, 1),  # an open loop, a trace, sessions: one process
        (1, 16, None, 1),
        (STREAMS_PER_WORKER, 16, None, 1),
        (STREAMS_PER_WORKER + 1, 16, None, 2),
        (256, 2, None, 2),  # as the old rule: 256 streams on 2 cores use both
        (1024, 16, None, 8),
        (4096, 16, None, 16),  # capped at the cores
        (4096, 1, None, 1),
        (1024, 16, LAG_BUDGET_MS, 8),  # at the budget: no change
        (1024, 16, 2 * LAG_BUDGET_MS, 16),  # a loop 2x the budget late: half the streams each
        (100, 16, 4 * LAG_BUDGET_MS, 4),  # lag alone can call for processes below 128 streams
        (100, 16, 0.2, 1),
    ],
)
def test_auto_workers_sizing(
    streams: int | None, cores: int, lag_ms: float | None, expected: int
) -> None:
    assert auto_workers(streams, cores, lag_ms) == expected


def test_more_lag_never_means_fewer_workers() -> None:
    sizes = [auto_workers(512, 64, lag) for lag in (None, 0.5, 1.0, 1.5, 3.0, 10.0, 100.0)]
    assert sizes == sorted(sizes) and sizes[-1] == 64


def test_the_idle_probe_measures_a_loop() -> None:
    lag = idle_lag_ms(duration_s=0.05)
    assert 0.0 <= lag < 1000.0


def test_cli_auto_runs_the_probe_only_where_it_matters(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []

    def fake_probe() -> float:
        calls.append(1.0)
        return 4 * LAG_BUDGET_MS

    monkeypatch.setattr("crossover.load.looplag.idle_lag_ms", fake_probe)
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(8)))
    assert workers_for("auto", None) == 1 and workers_for("auto", 4) == 1
    assert calls == []  # an open loop and a handful of streams: no probe
    assert workers_for("auto", 100) == 4  # 100 streams, 4x the lag budget: 32 streams a loop
    assert calls == [1.0]
    assert workers_for("3", 100) == 3


def test_run_and_sweep_size_auto_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --workers auto`` (the idle probe's lag) and a sweep level's ``workers: auto``
    (the previous level's lag) both go through ``auto_workers_here``: the same processes
    for the same streams and lag, one up to ``FEW_STREAMS`` streams or on one core."""
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(8)))
    monkeypatch.setattr("crossover.load.looplag.idle_lag_ms", lambda: 40.0)
    for streams in (1, FEW_STREAMS, FEW_STREAMS + 1, 100, 300, 5000):
        assert workers_for("auto", streams) == auto_workers_here(streams, 40.0)
    assert auto_workers_here(FEW_STREAMS, 40.0) == 1
    assert auto_workers_here(FEW_STREAMS + 1, 40.0) == 6  # 3 streams a process
    assert auto_workers_here(None, 40.0) == 1
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0})
    assert auto_workers_here(5000, None) == 1 and workers_for("auto", 5000) == 1
