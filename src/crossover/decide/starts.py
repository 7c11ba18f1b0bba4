"""What an engine start costs a replayed decision: per target, measured where possible.

A replay counts each engine start its order implies. What one costs, per target, in this
order of preference:

1. ``--start-s S``: the user's figure, for every target;
2. the database's own starts (``engine_starts``, kept by sweeps since they were timed):
   the mean of their seconds to ready plus their stop;
3. the target's engine logs in ``--engine-logs DIR`` (``NAME.log``, earlier starts'
   ``NAME.<stamp>.log``, ``.gz`` too), each read back by ``crossover.engines.ready``:
   the mean of their seconds to ready (a log does not time the stop);
4. an estimate, said as one: the engine's median start in this project's committed
   GPU results (:data:`ENGINE_STARTS`: llama.cpp loads a GGUF in seconds, vLLM and SGLang
   compile and capture CUDA graphs for 1-3 minutes), else ``START_S``.

``decide --check`` estimates a decision's GPU time before anything is measured with the
same per-engine figures (:func:`estimated_start`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from crossover.analysis.schema import EngineStart
from crossover.engines.launchrec import engine_logs
from crossover.errors import UsageError

#: an engine start's GPU time where nothing measured says it: the middle of the 1.5-2 min
#: the H200 decisions' engine starts took (issue 42)
START_S = 105.0
START_S_SOURCE = (
    "estimated: the middle of the 1.5-2 min the committed H200 decisions' engine starts took"
)


@dataclass(frozen=True)
class EngineStarts:
    """An engine's starts (launch to ready) in the engine logs committed under
    docs/results (H100 and H200, 2026-11-30 to 2026-12-06): their median, count and range.
    tests/decide/test_starts.py reads the logs again and checks each figure."""

    median_s: float
    count: int
    low_s: float
    high_s: float


#: per engine (its registry name), what its starts took where this project measured them
ENGINE_STARTS: dict[str, EngineStarts] = {
    "vllm": EngineStarts(107.0, 24, 62.0, 186.0),
    "sglang": EngineStarts(106.0, 21, 70.0, 204.0),
    "llamacpp": EngineStarts(4.0, 23, 2.0, 6.6),
}


@dataclass(frozen=True)
class StartCost:
    seconds: float
    source: str
    #: starts it is the mean of (0: not measured)
    measured: int = 0


def estimated_start(engine: str | None) -> StartCost:
    """What a start of ``engine`` is estimated to cost where nothing measured says it:
    its median in :data:`ENGINE_STARTS`, else ``START_S``."""
    known = ENGINE_STARTS.get(engine or "")
    if engine is None or known is None:
        return StartCost(START_S, START_S_SOURCE)
    from crossover.engines import registry

    return StartCost(
        known.median_s,
        f"estimated: the median of the {known.count} {registry.get(engine).display_name} "
        f"starts in this project's H100/H200 results ({known.low_s:g}-{known.high_s:g} s)",
    )


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def start_costs(
    targets: Sequence[str],
    recorded: Sequence[EngineStart],
    logs: Path | None = None,
    explicit: float | None = None,
    engines: Mapping[str, str] | None = None,
) -> dict[str, StartCost]:
    """Each target's cost of one engine start, and where it comes from (``engines``:
    each target's engine, for the estimate where nothing measured says it)."""
    if explicit is not None:
        return {t: StartCost(explicit, "--start-s") for t in targets}
    if logs is not None and not logs.is_dir():
        raise UsageError(f"--engine-logs {logs}: no such folder")
    from crossover.engines.effective import log_ready, read_log

    out: dict[str, StartCost] = {}
    for t in targets:
        mine = [s for s in recorded if s.target == t]
        if mine:
            each = [s.ready_s + (s.stop_s or 0.0) for s in mine]
            stops = sum(s.stop_s is not None for s in mine)
            out[t] = StartCost(
                _mean(each),
                f"timed by the sweep: {len(mine)} start(s), to ready and stopped"
                + ("" if stops == len(mine) else f" ({len(mine) - stops} without its stop)"),
                len(mine),
            )
            continue
        readings = []
        for path in engine_logs(logs, t) if logs is not None else []:
            _, ready = log_ready(read_log(path))
            if ready is not None:
                readings.append(ready.seconds)
        if readings:
            out[t] = StartCost(
                _mean(readings),
                f"read from {len(readings)} log(s) in {logs}, launch to ready",
                len(readings),
            )
        else:
            out[t] = estimated_start((engines or {}).get(t))
    return out
