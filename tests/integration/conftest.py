"""Run crossover's measurement core against the calibration server, in-process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crossover.calibration.config import CalibrationConfig, parse_fault
from crossover.calibration.server import serve, spawn
from crossover.calibration.tokenizer import WordTokenizer
from crossover.config import RunConfig, TimeoutsConfig
from crossover.records.store import Store
from crossover.runner import RunOutcome, execute
from crossover.transport import Transport
from crossover.workload import ServerTokenizer, Tokenizer

#: the transport ``run_against`` uses unless a test names one (``each_transport``)
TRANSPORT: list[Transport] = ["aiohttp"]

#: problem codes whose presence depends on how busy the test machine is, not on the
#: server: on a shared 2-core machine the client's own loop lag reaches the percentiles
#: of a 1 ms calibration stream, and an in-process server's writes of a 1 ms stream
#: bunch up (test_run_timing.py plants both and checks the flags)
MACHINE_DEPENDENT = frozenset({"client_made_percentiles", "grouped_delivery"})


@pytest.fixture
def each_transport(transport: Transport) -> Iterator[Transport]:
    """``run_against`` (and the test's own configs) on ``transport``: a module whose
    tests must pass on both transports uses it autouse."""
    TRANSPORT[0] = transport
    try:
        yield transport
    finally:
        TRANSPORT[0] = "aiohttp"


def codes(outcome: RunOutcome) -> dict[str, str]:
    """Problem code -> severity, less the machine-dependent ones."""
    return {p.code: p.severity for p in outcome.summary.problems if p.code not in MACHINE_DEPENDENT}


def problems(outcome: RunOutcome) -> list[str]:
    """The codes of the problems, less the machine-dependent ones."""
    return [p.code for p in outcome.summary.problems if p.code not in MACHINE_DEPENDENT]


def calib(*faults: str, **kw: Any) -> CalibrationConfig:
    base: dict[str, Any] = {"ttft_ms": 5.0, "itl_ms": 1.0}
    base.update(kw)
    return CalibrationConfig(faults=[parse_fault(f) for f in faults], **base)


def run_against(
    server: CalibrationConfig,
    tmp: Path,
    *,
    timeouts: dict[str, float] | None = None,
    text: bool | str = True,
    engine_metrics: bool = True,
    **run_kw: Any,
) -> tuple[RunOutcome, Store]:
    """One run against a calibration server in this event loop.

    With ``text`` the run has a tokenizer (the server's own word count): prompts of
    exact length and the streamed text re-tokenized; ``text="server"`` asks the server's
    ``/tokenize`` instead, as a run without ``--tokenizer`` does (it also counts the chat
    template's tokens; the server then runs in its own process, since that tokenizer
    blocks). With ``engine_metrics`` the server's generated-token counter is read around
    the run. Both are second witnesses.
    """

    async def measure(url: str) -> RunOutcome:
        kw: dict[str, Any] = {
            "url": url,
            "model": "calibration",
            "engine": "vllm",
            "concurrency": 4,
            "requests": 16,
            "output_tokens": 16,
            "input_tokens": 20,
            "warmup_requests": 0,
            "transport": TRANSPORT[0],
        }
        kw.update(run_kw)
        if timeouts:
            kw["timeouts"] = TimeoutsConfig(**timeouts)
        tokenizer: Tokenizer | None = WordTokenizer() if text else None
        if text == "server":
            tokenizer = ServerTokenizer(url, "calibration")
        return await execute(
            RunConfig(**kw),
            store,
            tokenizer=tokenizer,
            metrics_url=url + "/metrics" if engine_metrics else None,
        )

    async def go() -> RunOutcome:
        async with serve(server) as url:
            return await measure(url)

    store = Store(tmp / "results.db")
    if text == "server":
        with spawn(server) as url:
            return asyncio.run(measure(url)), store
    return asyncio.run(go()), store


def stamped_bounds(records: list[Any]) -> tuple[list[float], list[float], float, float]:
    """What TPOT and ITL may be, given the server's stamps, on a noisy machine.

    Each record's chunks carry the server's ``crossover_emit_ns`` (the client's clock), so
    its last-minus-first arrival is the server's own span moved by the delivery delay of
    the first and last chunk, both measured here (arrival less emission, never negative).
    Returns per-record TPOT bounds (``lo``, ``hi``: compare medians, which keep their
    order) and the pooled ITL mean's bounds. The time per token divides by the tokens
    after the first delivery (events within ``DELIVERY_GAP_NS`` of the one before are
    one; ITL stamps a delivery with its last event), one token per chunk here.
    """
    from crossover.metrics.requests import DELIVERY_GAP_NS

    tpot_lo, tpot_hi = [], []
    gap_lo = gap_hi = 0.0
    gap_tokens = 0
    for r in records:
        a, e = r.chunk_arrival_ns, r.chunk_emitted_ns
        assert e is not None and len(e) == len(a) >= 2
        d = [x - y for x, y in zip(a, e, strict=True)]
        assert min(d) >= 0, "a chunk arrived before the server wrote it: not one clock"
        k = 1
        while k < len(a) and a[k] - a[k - 1] < DELIVERY_GAP_NS:
            k += 1
        if k == len(a):
            continue  # all in one delivery: no time per token
        span = e[-1] - e[0]
        lo, hi = span - d[0], span + d[-1]
        tpot_lo.append(lo / (len(a) - k) / 1e6)
        tpot_hi.append(hi / (len(a) - k) / 1e6)
        gap_lo += (lo - (k - 1) * DELIVERY_GAP_NS) / 1e6
        gap_hi += hi / 1e6
        gap_tokens += len(a) - k
    return tpot_lo, tpot_hi, gap_lo / gap_tokens, gap_hi / gap_tokens
