"""Samples taken while a level runs: the engine's Prometheus gauges and, where
NVML is present, GPU utilisation, memory and power."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable
from typing import Any

import aiohttp

from crossover.engines import registry

#: series worth keeping (each engine's ``EngineSpec.metric_names``, docs/engines.md, and the
#: calibration server's); others are dropped to keep the store small
CALIBRATION_METRICS = (
    "calibration:num_requests_running",
    "calibration:num_requests_waiting",
    "calibration:generation_tokens_total",
)
DEFAULT_METRICS = (*registry.metric_names(), *CALIBRATION_METRICS)


def parse_prometheus(text: str, wanted: Iterable[str]) -> dict[str, float | None]:
    from prometheus_client.parser import text_string_to_metric_families

    keep = set(wanted)
    out: dict[str, float | None] = {}
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name in keep or fam.name in keep:
                    v = float(s.value)
                    # sum over label sets (e.g. per model_name); NaN is missing
                    prev = out.get(s.name) or 0.0
                    out[s.name] = None if math.isnan(v) else prev + v
    except ValueError:
        return out
    return out


class NVMLSampler:
    """GPU samples through nvidia-ml-py; inactive when NVML or a GPU is absent."""

    def __init__(self) -> None:
        self._nv: Any = None
        self._handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv = pynvml
            self._handles = [
                pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
            ]
        except Exception:  # no library, no driver, no GPU: nothing to sample
            self._nv = None

    @property
    def active(self) -> bool:
        return self._nv is not None and bool(self._handles)

    def sample(self, t_s: float) -> list[dict[str, Any]]:
        nv = self._nv
        out = []
        for i, h in enumerate(self._handles):
            row: dict[str, Any] = {"t_s": t_s, "index": i}
            readers: dict[str, Any] = {
                "util_pct": lambda d: nv.nvmlDeviceGetUtilizationRates(d).gpu,
                "mem_used_mib": lambda d: nv.nvmlDeviceGetMemoryInfo(d).used / 2**20,
                "power_w": lambda d: nv.nvmlDeviceGetPowerUsage(d) / 1000.0,
                "sm_clock_mhz": lambda d: nv.nvmlDeviceGetClockInfo(d, nv.NVML_CLOCK_SM),
            }
            for key, read in readers.items():
                try:
                    row[key] = float(read(h))
                except Exception:
                    row[key] = None
            out.append(row)
        return out


async def scrape_loop(
    metrics_url: str | None,
    nvml: NVMLSampler | None,
    interval_s: float,
    sink_prom: list[dict[str, Any]],
    sink_gpu: list[dict[str, Any]],
    wanted: Iterable[str] = DEFAULT_METRICS,
    stop: asyncio.Event | None = None,
) -> None:
    """Sample until ``stop`` is set (the level's load has ended) or cancelled. A failed
    scrape is skipped, never fatal.

    ``stop`` ends the samples where the load ends, whether or not a cancellation reaches
    the loop: aiohttp can turn one into a ``TimeoutError`` (``crossover.tasks``), which
    reads here as a failed scrape."""
    wanted = tuple(wanted)
    t0 = time.perf_counter()
    timeout = aiohttp.ClientTimeout(total=max(0.5, interval_s))
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while stop is None or not stop.is_set():
            t = time.perf_counter() - t0
            if metrics_url:
                try:
                    async with session.get(metrics_url) as resp:
                        if resp.status == 200:
                            values = parse_prometheus(await resp.text(), wanted)
                            if values:
                                sink_prom.append({"t_s": t, "values": values})
                except (aiohttp.ClientError, OSError, TimeoutError, UnicodeDecodeError):
                    pass
            if nvml is not None and nvml.active and not (stop is not None and stop.is_set()):
                sink_gpu.extend(nvml.sample(t))
            await asyncio.sleep(interval_s)
