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
   GPU results (each engine spec's ``measured_starts``: llama.cpp loads a GGUF in
   seconds, vLLM and SGLang compile and capture CUDA graphs for 1-3 minutes), else
   ``START_S``.

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
from crossover.words import plural

#: an engine start's GPU time where nothing measured says it: the middle of the 1.5-2 min
#: the H200 decisions' engine starts took (issue 42)
START_S = 105.0
START_S_SOURCE = (
    "estimated: the middle of the 1.5-2 min the committed H200 decisions' engine starts took"
)


@dataclass(frozen=True)
class StartCost:
    seconds: float
    source: str
    #: starts it is the mean of (0: not measured)
    measured: int = 0


def estimated_start(engine: str | None) -> StartCost:
    """What a start of ``engine`` is estimated to cost where nothing measured says it:
    its median where this project measured it (the engine spec's ``measured_starts``),
    else ``START_S``."""
    from crossover.engines import registry

    spec = registry.get(engine) if engine is not None and engine in registry.names() else None
    known = spec.measured_starts if spec is not None else None
    if spec is None or known is None:
        return StartCost(START_S, START_S_SOURCE)
    return StartCost(
        known.median_s,
        f"estimated: the median of the {known.count} {spec.display_name} "
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
                f"timed by the sweep: {plural(len(mine), 'start')}, to ready and stopped"
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
                f"read from {plural(len(readings), 'log')} in {logs}, launch to ready",
                len(readings),
            )
        else:
            out[t] = estimated_start((engines or {}).get(t))
    return out
