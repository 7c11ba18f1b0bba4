"""``workers: auto`` in a sweep: each level's load processes sized from its streams and the
client loop lag the target's previous level measured, or before its first level the idle
probe ``run --workers auto`` takes (``auto_workers``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.load.sizing import FEW_STREAMS
from crossover.sweep.config import Level, build_sweep_config
from crossover.sweep.level import TargetSession
from crossover.sweep.scrape import NVMLSampler


def _session(tmp_path: Path, workers: object) -> TargetSession:
    cfg = build_sweep_config({"concurrency": [1, 300], "output_tokens": 4, "workers": workers,
                              "targets": [{"name": "A", "url": "http://127.0.0.1:9", "model": "m"}]})  # fmt: skip
    return TargetSession(cfg.targets[0], cfg, tmp_path, NVMLSampler())


def test_auto_sizes_each_level_from_streams_and_the_last_lag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))
    s = _session(tmp_path, "auto")
    one, many = Level("concurrency", 1), Level("concurrency", 300)
    assert s.workers_for(one) == 1
    assert s.workers_for(many) == 3  # 128 streams a process
    s.loop_p99_ms = 4.0  # the last level's loop 4 ms late: a quarter as many streams each
    assert s.workers_for(many) == 8  # capped at the cores
    assert s.workers_for(Level("rate", 50.0)) == 1  # an open loop: one process


def test_a_number_stays_as_given_and_a_bad_value_is_refused(tmp_path: Path) -> None:
    assert _session(tmp_path, 3).workers_for(Level("concurrency", 300)) == 3
    assert _session(tmp_path, "2").workers_for(Level("concurrency", 1)) == 2
    with pytest.raises((UsageError, ValueError)):
        _session(tmp_path, "many")
    with pytest.raises((UsageError, ValueError)):
        _session(tmp_path, 0)


def test_a_handful_of_streams_runs_from_one_process_however_late_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``run --workers auto`` (``auto_workers_here``): up to ``FEW_STREAMS`` streams
    stay in one process whatever lag the previous level measured; above it the lag counts."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))
    s = _session(tmp_path, "auto")
    s.loop_p99_ms = 40.0  # 3 streams a process
    assert s.workers_for(Level("concurrency", FEW_STREAMS)) == 1
    assert s.workers_for(Level("concurrency", FEW_STREAMS + 1)) == 6
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert s.workers_for(Level("concurrency", 300)) == 1  # one core: one process


def test_a_target_s_first_level_is_sized_from_the_idle_probe_as_run_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before a target's first level nothing has measured its loop: ``workers: auto`` takes
    the idle probe ``run --workers auto`` takes (once, before the level's run exists, so
    its time is in no warm-up or measured window), and the first level gets the processes
    ``run`` would give it; the next level sizes from the lag the first one measured."""
    import yaml

    from crossover.cli.app import main
    from crossover.load import sizing
    from crossover.load.sizing import auto_workers

    from .conftest import Linear, db_runs, servers

    probes: list[float] = []

    def late_loop() -> float:
        probes.append(time.time())
        return 8.0  # 8 ms late: 16 streams a process

    monkeypatch.setattr("crossover.load.looplag.idle_lag_ms", late_loop)
    monkeypatch.setattr(sizing, "usable_cores", lambda: 8)
    with servers(Linear(a_ms=1.0, b_ms=0.0)) as (url,):
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump({
            "targets": [{"name": "A", "url": url, "engine": "vllm", "model": "calibration"}],
            "concurrency": [FEW_STREAMS + 1, FEW_STREAMS + 4], "requests_per_level": 40,
            "output_tokens": 4, "input_tokens": 8, "workers": "auto",
        }))  # fmt: skip
        out = tmp_path / "s"
        assert main(["sweep", "--config", str(config), "--out", str(out), "--no-report"]) == 0
    runs = {r.key: r for r in db_runs(out)}
    first, second = runs[f"A|c={FEW_STREAMS + 1}|r=0"], runs[f"A|c={FEW_STREAMS + 4}|r=0"]
    assert len(probes) == 1  # the first level only
    assert probes[0] < first.created_at  # before the level's run began
    assert first.summary is not None and second.summary is not None
    assert first.summary["load"]["workers"] == auto_workers(FEW_STREAMS + 1, 8, 8.0) == 2
    lag = first.summary["client_loop"]["p99_ms"]
    assert second.summary["load"]["workers"] == auto_workers(FEW_STREAMS + 4, 8, lag)


@pytest.mark.parametrize(
    ("workers", "first", "cores"),
    [
        ("auto", 1, 8),  # one stream: one process whatever the lag
        ("auto", FEW_STREAMS, 8),
        ("auto", 300, 1),  # one core: one process
        (4, 300, 8),  # a number: nothing to size
    ],
)
def test_no_idle_probe_where_its_answer_could_not_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: object, first: int, cores: int
) -> None:
    import asyncio

    from crossover.load import sizing

    def no_probe() -> float:
        raise AssertionError("probed")

    monkeypatch.setattr("crossover.load.looplag.idle_lag_ms", no_probe)
    monkeypatch.setattr(sizing, "usable_cores", lambda: cores)
    s = _session(tmp_path, workers)
    asyncio.run(s.probe_idle_loop(Level("concurrency", first)))
    asyncio.run(s.probe_idle_loop(Level("rate", 50.0)))  # an open loop: one process
    assert s.loop_p99_ms is None


def test_the_idle_probe_is_taken_once_and_a_measured_lag_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from crossover.load import sizing

    calls: list[int] = []

    def probe() -> float:
        calls.append(1)
        return 3.0

    monkeypatch.setattr("crossover.load.looplag.idle_lag_ms", probe)
    monkeypatch.setattr(sizing, "usable_cores", lambda: 8)
    s = _session(tmp_path, "auto")
    asyncio.run(s.probe_idle_loop(Level("concurrency", 300)))
    assert s.loop_p99_ms == 3.0 and s.workers_for(Level("concurrency", 300)) == 8
    asyncio.run(s.probe_idle_loop(Level("concurrency", 300)))
    assert calls == [1]
    s.loop_p99_ms = 0.4  # a level measured since: its lag, not the probe's, sizes the next
    asyncio.run(s.probe_idle_loop(Level("concurrency", 300)))
    assert calls == [1] and s.workers_for(Level("concurrency", 300)) == 3
