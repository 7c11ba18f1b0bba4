"""The shared-clock claim behind ``crossover_emit_ns``, and ``spawn()``.

On Linux ``time.perf_counter_ns()`` reads CLOCK_MONOTONIC, one clock for every process
of the machine, so a client can subtract the server's emission stamp from its own
arrival time and get the delivery delay exactly.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from crossover.calibration.server import CalibrationConfig, spawn

from .conftest import Streamed, run, stream

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux clocks")


@linux_only
def test_perf_counter_is_clock_monotonic() -> None:
    info = time.get_clock_info("perf_counter")
    assert info.implementation == "clock_gettime(CLOCK_MONOTONIC)"
    assert info.monotonic


@linux_only
def test_perf_counter_is_shared_across_processes() -> None:
    code = "import time; print(time.perf_counter_ns(), flush=True)"
    for _ in range(3):
        before = time.perf_counter_ns()
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        after = time.perf_counter_ns()
        child = int(out)
        # a per-process clock (e.g. one started at process launch) would fall far outside
        assert before < child < after


@linux_only
def test_spawned_server_stamps_fall_between_send_and_arrival(
    body: Callable[..., dict[str, Any]],
) -> None:
    cfg = CalibrationConfig(ttft_ms=5.0, itl_ms=2.0)
    with spawn(cfg) as url:

        async def go() -> Streamed:
            async with aiohttp.ClientSession() as s:
                return await stream(s, url + "/v1/completions", body(20))

        s = run(go)
        assert s.tokens == 20
        assert s.done
        for chunk_event in s.events:
            chunk = chunk_event.json
            if chunk is None:
                continue
            emit = chunk["crossover_emit_ns"]
            assert s.send_ns < emit <= chunk_event.arrival_ns
            # delivery delay on one machine: well under a second even when it is busy
            assert chunk_event.arrival_ns - emit < 500_000_000
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/health", timeout=1.0)
