"""Run crossover's measurement core against the calibration server, in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from crossover.calibration.config import CalibrationConfig, parse_fault
from crossover.calibration.server import serve
from crossover.calibration.tokenizer import WordTokenizer
from crossover.config import RunConfig, TimeoutsConfig
from crossover.records.store import Store
from crossover.runner import RunOutcome, execute

#: problem codes whose presence depends on how busy the test machine is, not on the
#: server: the client's own loop lag on a shared 2-core machine reaches the percentiles
#: of a 1 ms calibration stream (test_run_timing.py plants the lag and checks the flag)
MACHINE_DEPENDENT = frozenset({"client_made_percentiles"})


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
    text: bool = True,
    engine_metrics: bool = True,
    **run_kw: Any,
) -> tuple[RunOutcome, Store]:
    """One run against a calibration server in this event loop.

    With ``text`` the run has a tokenizer (the server's own word count): prompts of
    exact length and the streamed text re-tokenized. With ``engine_metrics`` the
    server's generated-token counter is read around the run. Both are second witnesses.
    """

    async def go() -> RunOutcome:
        async with serve(server) as url:
            kw: dict[str, Any] = {
                "url": url,
                "model": "calibration",
                "engine": "vllm",
                "concurrency": 4,
                "requests": 16,
                "output_tokens": 16,
                "input_tokens": 20,
                "warmup_requests": 0,
            }
            kw.update(run_kw)
            if timeouts:
                kw["timeouts"] = TimeoutsConfig(**timeouts)
            return await execute(
                RunConfig(**kw),
                store,
                tokenizer=WordTokenizer() if text else None,
                metrics_url=url + "/metrics" if engine_metrics else None,
            )

    store = Store(tmp / "results.db")
    return asyncio.run(go()), store
