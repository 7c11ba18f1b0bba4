"""Capacity per target of a sweep YAML: each ``launch:`` target's engine is started (on the
GPUs the sweep gives it: ``TargetConfig.engine_gpus``), searched and stopped in turn (one
engine at a time); URL targets are searched as they are."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crossover.capacity.runner import CapacityConfig, CapacityEvents, CapacityRunner
from crossover.capacity.schema import CapacityFile, CapacitySet
from crossover.sweep.config import SweepConfig, TargetConfig


async def _search(
    base: dict[str, Any], url: str, dialect: str, model: str, out: Path, events: CapacityEvents
) -> CapacityFile:
    cfg = CapacityConfig.model_validate({**base, "url": url, "engine": dialect, "model": model})
    runner = CapacityRunner(cfg, out, events)
    try:
        return await runner.run()
    finally:
        runner.close()


async def capacity_per_target(
    sweep: SweepConfig,
    base: dict[str, Any],
    out: Path,
    events: CapacityEvents,
    on_target: Callable[[str, str], None] | None = None,
) -> CapacitySet:
    """``base``: the CapacityConfig fields shared by every target (SLO, precision, ...).
    Replicas, and launched engines that ask for more GPUs than they will see
    (:func:`crossover.sweep.check.check_replica_gpus`), are refused before any starts."""
    from crossover.errors import UsageError
    from crossover.sweep.check import check_replica_gpus

    for t in sweep.targets:
        if t.urls is not None or (t.launch is not None and t.launch.replicas > 1):
            raise UsageError(f"target {t.name}: capacity searches one server, not replicas")
    # an engine asking for more GPUs than it will see: one line now, as the sweep says it,
    # not a failed start minutes into the first target
    check_replica_gpus(sweep.targets)
    results: list[CapacityFile] = []
    for t in sweep.targets:
        folder = out / t.name
        if on_target:
            on_target(t.name, "searching")
        if t.url is not None:
            res = await _search(base, t.url, t.engine or "openai", t.model or "", folder, events)
        else:
            res = await _launched(t, base, folder, events)
        res.target["name"] = t.name
        results.append(res)
    return CapacitySet(targets=results)


async def _launched(
    t: TargetConfig, base: dict[str, Any], folder: Path, events: CapacityEvents
) -> CapacityFile:
    from crossover.devices import VISIBLE
    from crossover.engines.lifecycle import start

    assert t.launch is not None
    ecfg = t.launch.engine_config()
    # the GPUs the sweep gives its replica 0 (``gpus_per_replica``: the first k visible),
    # not every GPU this process sees
    gpus = t.engine_gpus
    if gpus is not None and ecfg.env.get(VISIBLE) != gpus:
        ecfg = ecfg.model_copy(update={"env": {**ecfg.env, VISIBLE: gpus}})
    adapter = t.launch.adapter
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    # started from the main thread, as the sweep does, so the engine dies with us
    engine = start(ecfg, folder / "engine.log")
    try:
        await engine.await_healthy(ecfg.health_timeout_s)
        model = t.model or ecfg.model
        name = adapter.dialect.name
        return await _search(base, engine.url, name, str(model), folder, events)
    finally:
        await asyncio.to_thread(engine.stop)
