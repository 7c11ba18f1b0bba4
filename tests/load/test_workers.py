"""Several client processes for one run, against a spawned calibration server."""

from __future__ import annotations

import asyncio
import itertools
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.server import spawn
from crossover.load.workers import plan_shares
from crossover.measure import RunOutcome, execute
from crossover.records.model import RequestRecord
from crossover.records.store import Store
from crossover.spec.run import RunConfig
from crossover.transport import TransportName
from tests.timing import stamped_bounds


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


def test_two_workers_match_one(server: str, tmp_path: Path, transport: TransportName) -> None:
    one, store_one = _run(server, tmp_path, 1, transport=transport)
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
    # each run's TPOT and ITL are the server's own time per token (its stamps on every
    # chunk, one clock across the processes) moved only by the delivery delays that run
    # measured: two runs one after the other on a shared machine see different noise, so
    # each is held to its own truth rather than to the other's figure
    for out, st in ((one, store_one), (two, store)):
        s = out.summary
        tpot_lo, tpot_hi, itl_lo, itl_hi = stamped_bounds(
            st.records(out.run_id, include_warmup=False)
        )
        assert s.tpot_ms.p50 is not None and s.itl_ms.mean is not None
        assert statistics.median(tpot_lo) <= s.tpot_ms.p50 <= statistics.median(tpot_hi)
        assert itl_lo <= s.itl_ms.mean <= itl_hi
        # the throughput is what the streams in flight deliver (Little's law, in this
        # run's own figures): a worker whose tokens went uncounted falls outside
        assert s.load.achieved_concurrency is not None and s.e2e_ms.mean is not None
        assert s.throughput.output_tokens_per_s is not None
        little = s.load.achieved_concurrency * 24 / s.e2e_ms.mean * 1000
        assert s.throughput.output_tokens_per_s == pytest.approx(little, rel=0.1)
    assert s2.load.achieved_concurrency == pytest.approx(8, rel=0.2)
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


def _content(store: Store, out: RunOutcome) -> dict[int, tuple[object, ...]]:
    """Each measured request's work by its prompt (the run's own request index): what a
    run split over workers must send exactly as one process does."""
    return {
        r.prompt_id: (
            r.expected_prompt_tokens,
            r.expected_output_tokens,
            r.prompt_tokens,
            r.completion_tokens,
            r.ok,
        )
        for r in store.records(out.run_id, include_warmup=False)
    }


def _by_prompt(store: Store, out: RunOutcome) -> dict[int, RequestRecord]:
    return {r.prompt_id: r for r in store.records(out.run_id, include_warmup=False)}


@pytest.mark.parametrize(
    "load", [{"concurrency": 5}, {"concurrency": None, "rate_rps": 60.0}], ids=["closed", "open"]
)
def test_sessions_over_workers_send_the_one_process_work(
    server: str, tmp_path: Path, load: dict[str, object]
) -> None:
    """22 requests as sessions of 3 turns (the last one cut short), split over workers by
    session: the same prompts and lengths as one process, each session wholly in one
    worker, its turns in order; an open loop's sessions start on one shared schedule."""
    kw: dict[str, object] = {
        "sessions": {"turns": 3, "think_s": 0.01}, "requests": 22, "warmup_requests": 2,
        "output_tokens": "uniform:4-12", "input_tokens": 8, **load,
    }  # fmt: skip
    one, store1 = _run(server, tmp_path, 1, **kw)
    three, store3 = _run(server, tmp_path, 3, **kw)
    assert three.summary.verdict == "valid", three.summary.problems
    assert three.summary.load.workers == 3
    assert _content(store3, three) == _content(store1, one)
    assert sorted(_content(store3, three)) == list(range(22))
    recs = _by_prompt(store3, three)
    for s in range(8):
        turns = [recs[i] for i in range(s * 3, min(s * 3 + 3, 22))]
        assert len({r.worker for r in turns}) == 1  # the session stayed in one worker
        for a, b in itertools.pairwise(turns):
            assert a.t_done_ns is not None and b.t_send_ns >= a.t_done_ns
    assert {r.worker for r in recs.values()} == {0, 1, 2}
    # turns by the prompt's place, not the arrival order the workers' records get
    assert [t.prompt_tokens.mean for t in three.summary.turns] == [
        t.prompt_tokens.mean for t in one.summary.turns
    ]
    assert [t.ttft_ms.count for t in three.summary.turns] == [8, 7, 7]
    if load.get("rate_rps"):
        # the sessions' starts are the one Poisson schedule of the run's seed
        firsts1 = [_by_prompt(store1, one)[s * 3].t_scheduled_ns or 0 for s in range(8)]
        firsts3 = [recs[s * 3].t_scheduled_ns or 0 for s in range(8)]
        assert [t - firsts1[0] for t in firsts1] == [t - firsts3[0] for t in firsts3]


def test_a_trace_over_workers_keeps_its_times_and_lengths(server: str, tmp_path: Path) -> None:
    """The trace split over workers by line: every line's lengths and its time against the
    one shared start, as one process replays it."""
    sample = Path(__file__).resolve().parents[2] / "docs" / "examples" / "trace-sample.jsonl"
    kw: dict[str, object] = {
        "trace": sample, "trace_speed": 8.0, "requests": 24, "warmup_requests": 2,
        "concurrency": None, "output_tokens": None, "input_tokens": None,
    }  # fmt: skip
    one, store1 = _run(server, tmp_path, 1, **kw)
    two, store2 = _run(server, tmp_path, 2, **kw)
    assert two.summary.verdict == "valid", two.summary.problems
    assert _content(store2, two) == _content(store1, one)
    recs1, recs2 = _by_prompt(store1, one), _by_prompt(store2, two)
    assert {r.worker for r in recs2.values()} == {0, 1}
    assert all(recs2[i].worker == i % 2 for i in recs2)  # by line index
    t1 = [recs1[i].t_scheduled_ns or 0 for i in range(24)]
    t2 = [recs2[i].t_scheduled_ns or 0 for i in range(24)]
    assert [t - t1[0] for t in t1] == [t - t2[0] for t in t2]
    # sent on time: a worker on its own clock would be off by its start-up (seconds); a
    # loaded 2-core machine (server + 2 workers + a build) has been seen 75 ms late
    late_ms = [(r.t_send_ns - (r.t_scheduled_ns or 0)) / 1e6 for r in recs2.values()]
    assert max(late_ms) < 250.0


def test_plan_shares_splits_sessions_whole_and_schedules_by_index() -> None:
    closed = plan_shares(
        workers=3, concurrency=5, rate_rps=None, max_in_flight=None, requests=22,
        duration_s=None, warmup=0, seed=7, turns=3,
    )  # fmt: skip
    # 8 sessions over streams 2, 2, 1: whole sessions (3, 3, 2), the last one cut short
    assert [s.requests for s in closed] == [9, 9, 4]
    assert [s.prompt_offset for s in closed] == [0, 9, 18]
    assert all(s.part is None for s in closed)
    opened = plan_shares(
        workers=4, concurrency=None, rate_rps=2.0, max_in_flight=None, requests=6,
        duration_s=None, warmup=0, seed=7, turns=3,
    )  # fmt: skip
    # two sessions: two workers, each walking the whole schedule at the whole rate
    assert [s.part for s in opened] == [(0, 2), (1, 2)]
    assert [(s.rate_rps, s.requests, s.seed, s.prompt_offset) for s in opened] == [
        (2.0, 6, 7, 0)
    ] * 2
    trace = plan_shares(
        workers=2, concurrency=None, rate_rps=3.0, max_in_flight=4, requests=None,
        duration_s=10.0, warmup=0, seed=7, trace=True,
    )  # fmt: skip
    assert [s.part for s in trace] == [(0, 2), (1, 2)]
    assert [s.max_in_flight for s in trace] == [2, 2]
