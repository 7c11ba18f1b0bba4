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
from crossover.measure import RunOutcome, execute
from crossover.records.store import Store
from crossover.spec.limits import Timeouts
from crossover.spec.run import RunConfig
from crossover.transport import TransportName
from crossover.workload import ServerTokenizer, Tokenizer

#: the transport ``run_against`` uses unless a test names one (``each_transport``)
TRANSPORT: list[TransportName] = ["aiohttp"]

#: problem codes whose presence depends on how busy the test machine is, not on the
#: server: on a shared 2-core machine the client's own loop lag reaches the percentiles
#: of a 1 ms calibration stream, and an in-process server's writes of a 1 ms stream
#: bunch up (test_run_timing.py plants both and checks the flags)
MACHINE_DEPENDENT = frozenset({"client_made_percentiles", "grouped_delivery"})


@pytest.fixture
def each_transport(transport: TransportName) -> Iterator[TransportName]:
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
            kw["timeouts"] = Timeouts(**timeouts)
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
