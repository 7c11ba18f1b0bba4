"""Timing that is not the engine's, against a real HTTP server: tokens delivered in
bursts, heartbeats between tokens, and percentiles the client's own event loop made."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import pytest

from crossover.calibration.server import spawn
from crossover.calibration.tokenizer import WordTokenizer
from crossover.measure import RunOutcome, execute
from crossover.records.store import Store
from crossover.spec.run import RunConfig
from tests.integration.conftest import calib, codes, run_against

N = 16


def test_burst_delivery_is_flagged_and_itl_is_the_engines_pace(tmp_path: Path) -> None:
    """A server (or proxy) that writes 8 tokens at a time: the events of a burst arrive in
    one read. ITL spreads each delivery's gap over its tokens (4 ms, the pace the tokens
    were made at, not 0.00), TPOT counts only the tokens after the first delivery, the raw
    event gaps show the bursts, and the run says so."""
    out, _ = run_against(calib("burst_delivery", itl_ms=4.0, burst_tokens=8), tmp_path)
    s = out.summary
    assert s.verdict == "valid", s.problems  # the work was done: a warning, not invalid
    found = {p.code: p.severity for p in s.problems if p.code != "client_made_percentiles"}
    assert found == {"grouped_delivery": "warning"}
    (p,) = [p for p in s.problems if p.code == "grouped_delivery"]
    assert "bursts" in p.message
    assert s.delivery.grouped_fraction is not None and s.delivery.grouped_fraction > 0.8
    assert s.itl_ms.p50 == pytest.approx(4.0, rel=0.25)
    assert s.tpot_ms.p50 == pytest.approx(4.0, rel=0.25)
    assert s.chunk_gap_ms.p50 is not None and s.chunk_gap_ms.p50 < 0.1


def test_an_honest_stream_is_not_grouped(tmp_path: Path) -> None:
    out, _ = run_against(calib(itl_ms=4.0), tmp_path)
    assert "grouped_delivery" not in {p.code for p in out.summary.problems}
    assert out.summary.delivery.grouped_fraction is not None
    assert out.summary.delivery.grouped_fraction < 0.2


def test_heartbeats_do_not_re_arm_the_gap_limit(tmp_path: Path) -> None:
    """After half the tokens, only comments for 1.5 s: the gap limit (0.5 s) is between
    tokens, and the bytes of a heartbeat are no token."""
    t0 = time.perf_counter()
    out, store = run_against(
        calib("heartbeat_stall:0.25", stall_s=1.5, heartbeat_ms=50.0),
        tmp_path,
        timeouts={"gap_s": 0.5},
    )
    assert time.perf_counter() - t0 < 10
    s = out.summary
    assert codes(out) == {"timeout": "error"}
    assert s.requests.failed == 4
    failed = [r for r in store.records(out.run_id) if not r.ok]
    assert {r.error for r in failed} == {"no next token within 0.5 s"}
    assert {len(r.chunk_arrival_ns) for r in failed} == {N // 2}


def _hog_run(tmp_path: Path, hog_ms: float) -> tuple[RunOutcome, Store]:
    """A run whose client event loop is held ``hog_ms`` every 25 ms by other work, as a
    saturated client's is; the server, in its own process, stamps its own writes."""

    async def go(url: str) -> RunOutcome:
        stop = asyncio.Event()

        async def hog() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.025)
                time.sleep(hog_ms / 1e3)  # noqa: ASYNC251 - the loop held, as on purpose

        task = asyncio.ensure_future(hog())
        try:
            cfg = RunConfig(
                url=url,
                model="calibration",
                engine="vllm",
                concurrency=4,
                requests=16,
                output_tokens=32,
                input_tokens=20,
                warmup_requests=0,
            )
            return await execute(cfg, store, tokenizer=WordTokenizer())
        finally:
            stop.set()
            await task

    store = Store(tmp_path / "r.db")
    with spawn(calib(ttft_ms=20.0, itl_ms=10.0)) as url:
        return asyncio.run(go(url)), store


def test_percentiles_the_client_made_are_flagged(tmp_path: Path) -> None:
    out, store = _hog_run(tmp_path, hog_ms=12.0)
    s = out.summary
    assert s.verdict == "valid", s.problems  # the work was matched; the tails are suspect
    assert s.client_loop is not None and s.client_loop.p99_ms is not None
    assert s.client_loop.p99_ms > 8.0
    assert "itl_ms.p99" in s.client_made
    assert "tpot_ms.p50" not in s.client_made  # the lag spreads over 31 gaps
    (p,) = [p for p in s.problems if p.code == "client_made_percentiles"]
    assert p.severity == "warning"
    assert "itl_ms" in p.message and "--workers" in p.message
    # the flag is right: against the server's own stamps (its own process, the same
    # clock), the client stamped chunks late by the lag it measured
    late = []
    for r in store.records(out.run_id, include_warmup=False):
        assert r.chunk_emitted_ns is not None
        late += [(a - e) / 1e6 for a, e in zip(r.chunk_arrival_ns, r.chunk_emitted_ns, strict=True)]
    assert statistics.quantiles(late, n=100)[98] > 5.0
