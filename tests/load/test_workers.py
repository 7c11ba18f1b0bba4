"""Several client processes for one run, against a spawned calibration server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.server import spawn
from crossover.config import RunConfig
from crossover.load.workers import plan_shares
from crossover.records.store import Store
from crossover.runner import RunOutcome, execute
from crossover.transport import Transport


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with spawn(CalibrationConfig(ttft_ms=5.0, itl_ms=4.0)) as url:
        yield url


def _run(url: str, tmp: Path, workers: int, **kw: object) -> tuple[RunOutcome, Store]:
    cfg: dict[str, object] = {
        "url": url,
        "model": "calibration",
        "engine": "vllm",
        "concurrency": 8,
        "requests": 48,
        "output_tokens": 24,
        "input_tokens": 10,
        "warmup_requests": 4,
        "workers": workers,
    }
    cfg.update(kw)
    store = Store(tmp / f"w{workers}.db")
    return asyncio.run(execute(RunConfig(**cfg), store)), store  # type: ignore[arg-type]


def test_two_workers_match_one(server: str, tmp_path: Path, transport: Transport) -> None:
    one, _ = _run(server, tmp_path, 1, transport=transport)
    two, store = _run(server, tmp_path, 2, transport=transport)
    s1, s2 = one.summary, two.summary
    assert s2.load.workers == 2 and s1.load.workers == 1
    assert s1.load.transport == s2.load.transport == transport  # the workers' client too
    assert s2.verdict == "valid"
    assert s2.requests.sent == 48 and s2.requests.matched == 48 and s2.requests.warmup == 4
    stored = store.records(two.run_id, include_warmup=False)
    assert len(stored) == 48
    assert sorted(r.index for r in stored) == list(range(48))
    assert {r.worker for r in stored} == {0, 1}
    warm = [r for r in store.records(two.run_id) if r.warmup]
    assert sorted(r.index for r in warm) == list(range(4))
    assert s2.tpot_ms.p50 == pytest.approx(s1.tpot_ms.p50, rel=0.15)
    # means, not p50s: on a busy machine chunks coalesce into one read (gaps of 0)
    assert s2.itl_ms.mean == pytest.approx(s1.itl_ms.mean, rel=0.15)
    assert s2.load.achieved_concurrency == pytest.approx(8, rel=0.2)
    assert s2.throughput.output_tokens_per_s == pytest.approx(
        s1.throughput.output_tokens_per_s, rel=0.3
    )
    stored_summary = store.run(two.run_id)
    assert stored_summary is not None and stored_summary.summary is not None
    assert stored_summary.summary["load"]["workers"] == 2


def test_open_loop_over_workers(server: str, tmp_path: Path) -> None:
    out, _ = _run(server, tmp_path, 2, concurrency=None, rate_rps=200.0, requests=30)
    s = out.summary
    assert s.verdict == "valid" and s.requests.sent == 30 and s.load.workers == 2
    assert s.queue_ms.count == 30


def test_plan_shares_split_evenly() -> None:
    shares = plan_shares(
        workers=3, concurrency=10, rate_rps=None, max_in_flight=None, requests=31,
        duration_s=None, warmup=5, seed=0,
    )  # fmt: skip
    assert [s.concurrency for s in shares] == [4, 3, 3]
    assert sum(s.requests or 0 for s in shares) == 31
    assert sum(s.warmup for s in shares) == 5
    assert [s.prompt_offset for s in shares] == [0, shares[0].requests, 31 - shares[2].requests]  # type: ignore[operator]
    few = plan_shares(
        workers=8, concurrency=2, rate_rps=None, max_in_flight=None, requests=4,
        duration_s=None, warmup=0, seed=0,
    )  # fmt: skip
    assert len(few) == 2
    rate = plan_shares(
        workers=2, concurrency=None, rate_rps=10.0, max_in_flight=5, requests=None,
        duration_s=3.0, warmup=2, seed=1,
    )  # fmt: skip
    assert [s.rate_rps for s in rate] == [5.0, 5.0]
    assert [s.max_in_flight for s in rate] == [3, 2]
    assert len({s.seed for s in rate}) == 2
