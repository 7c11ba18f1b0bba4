"""``workers: auto`` in a sweep: each level's load processes sized from its streams and the
client loop lag the target's previous level measured (``auto_workers``)."""

from __future__ import annotations

import os
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
