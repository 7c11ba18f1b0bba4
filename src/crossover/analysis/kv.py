"""A level past the engine's KV-cache capacity, told from the gauges sampled while it ran.

A sweep keeps the engine's Prometheus gauges about once a second while a level runs
(``SweepRun.server_metrics``). Each engine that has them declares two of those series
(``EngineSpec.kv_usage_metric``, ``EngineSpec.waiting_metric``): how full its KV cache
is (0-1: vLLM ``vllm:kv_cache_usage_perc``, SGLang ``sglang:token_usage``, llama.cpp
``llamacpp:kv_cache_usage_ratio``) and how many requests wait for room (vLLM
``vllm:num_requests_waiting``, SGLang ``sglang:num_queue_reqs``, llama.cpp
``llamacpp:requests_deferred``).

The rule: a level's KV cache was **full** when at least one sample read a usage of
``FULL`` or more *and*, in that same sample, one request or more waiting. A queue alone is
no sign (a closed loop's burst queues at its start while the cache fills: vLLM at 256
queued 153 with its cache at 0.89), nor is a full cache alone (every request had room,
none waited for it). When both hold, requests waited for KV room (SGLang also retracts
running ones to make it): the level's TTFT counts that wait, and can move with how the
engine happened to schedule it (SGLang at 256 on an H100: TTFT p50 527, 707 and 1,250 ms
in three measurements, docs/results/h100/moe-warm-grid and moe-warm-decide-b).

A run with no reading of any declared usage series (an engine without one, such as the
calibration server, or a sweep that kept no gauges) gives ``None``; one with a usage
series but no waiting series is never full (nothing says a request waited).

**Queued** (an open loop): requests waited to be admitted in ``QUEUED_IN_A_ROW`` samples
or more in a row spanning ``QUEUED_FOR_S`` or more, the cache short of ``FULL``. Arrivals
do not wait on completions, so a queue that lasts over a second is the engine holding
requests back, not a burst: its running-request limit, or (SGLang) the KV room it keeps
for the tokens its running requests have still to generate, which the usage gauge does
not count. On one H100 (docs/results/h100/moe-open-decide-freeze) SGLang at 20 requests/s
ran up to 255 of its 256 slots with up to 25 waiting at usage 0.94, and (its second
repeat) up to 237 with up to 16 waiting at 0.89; its TTFT p99 read 1,131 and 1,004 ms
against 137-147 ms at 16 requests/s, where nothing waited, and vLLM's 405-446 ms at 20
(up to 300 running, none waiting). A level the sweep found overloaded (served under 80%
of what arrived) is said as overloaded instead, and a full one as full.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from crossover.analysis.schema import ServerMetricsSample, SweepFile, SweepRun, level_label
from crossover.engines import registry

#: one engine's gauges, the one a reading is looked for by first
_Series = TypeVar("_Series", bound=tuple[Any, ...])

#: a usage reading at or above this is a full cache (the engines keep a few blocks spare:
#: vLLM read 0.9995 at most where it queued 255 requests)
FULL = 0.98
#: what a flagged level means, said wherever one is shown
MEANING = "the engine's KV cache was full: requests waited for room, so TTFT there counts that wait"


@dataclass(frozen=True)
class KvPressure:
    """How full one run's KV cache was, and how many requests waited."""

    usage_series: str
    waiting_series: str | None
    #: the largest usage read (0-1)
    peak_usage: float
    #: the most requests read waiting; None: no reading of the waiting series
    peak_waiting: float | None
    #: samples with a usage reading
    samples: int
    #: of those, samples reading ``FULL`` or more
    full_samples: int
    #: of those, samples that also read a request or more waiting
    full_waiting_samples: int

    @property
    def full(self) -> bool:
        """The cache was full while requests waited (the module's rule)."""
        return self.full_waiting_samples > 0

    def describe(self) -> str:
        waiting = "-" if self.peak_waiting is None else f"{self.peak_waiting:.0f}"
        return (
            f"KV usage up to {self.peak_usage:.2f}, up to {waiting} requests waiting "
            f"({self.full_waiting_samples} of {self.samples} samples full with requests "
            "waiting)"
        )


def _first_read(
    declared: Sequence[_Series], samples: Sequence[ServerMetricsSample]
) -> _Series | None:
    """The first of ``declared`` (each engine's gauges, the one to look for first) whose
    first gauge was read in ``samples``."""
    for series in declared:
        if any(s.values.get(series[0]) is not None for s in samples):
            return series
    return None


def kv_pressure(samples: Sequence[ServerMetricsSample] | None) -> KvPressure | None:
    """The run's KV-cache readings against ``FULL``; ``None`` without a usage reading."""
    if not samples:
        return None
    pair = _first_read(registry.kv_series(), samples)
    if pair is None:
        return None
    usage_series, waiting_series = pair
    usages: list[float] = []
    waits: list[float] = []
    full = full_waiting = 0
    for s in samples:
        waiting = s.values.get(waiting_series) if waiting_series is not None else None
        if waiting is not None:
            waits.append(waiting)
        usage = s.values.get(usage_series)
        if usage is None:
            continue
        usages.append(usage)
        if usage >= FULL:
            full += 1
            if waiting is not None and waiting > 0:
                full_waiting += 1
    return KvPressure(
        usage_series=usage_series,
        waiting_series=waiting_series,
        peak_usage=max(usages),
        peak_waiting=max(waits) if waits else None,
        samples=len(usages),
        full_samples=full,
        full_waiting_samples=full_waiting,
    )


@dataclass(frozen=True)
class KvFullRun:
    """One run whose KV cache was full with requests waiting."""

    target: str
    label: str  # its level: ``c=256``, ``rate=2.5``
    level: float
    repeat: int
    pressure: KvPressure


def kv_full_runs(sweep: SweepFile, targets: Sequence[str] | None = None) -> list[KvFullRun]:
    """The sweep's runs (of ``targets``, when given) whose KV cache was full, in the
    sweep's target order, then by level and repeat."""
    rank = sweep.target_rank()
    out: list[tuple[tuple[int, float, int], KvFullRun]] = []
    for r in sweep.runs:
        if targets is not None and r.target not in targets:
            continue
        found = kv_pressure(r.server_metrics)
        if found is None or not found.full:
            continue
        out.append(((rank(r.target), r.level, r.repeat), _full_run(r, found)))
    return [x for _, x in sorted(out, key=lambda kx: kx[0])]


def _full_run(r: SweepRun, found: KvPressure) -> KvFullRun:
    return KvFullRun(r.target, level_label(r.axis, r.level), r.level, r.repeat, found)


def format_kv_full(runs: Sequence[KvFullRun]) -> list[str]:
    """One line per target and level among ``runs``: its repeats, the peak usage and the
    most requests waiting over them, and what it means."""
    groups: dict[tuple[str, str], list[KvFullRun]] = {}
    for x in runs:
        groups.setdefault((x.target, x.label), []).append(x)
    lines = []
    for (target, label), xs in groups.items():
        usage = max(x.pressure.peak_usage for x in xs)
        waits = [x.pressure.peak_waiting for x in xs if x.pressure.peak_waiting is not None]
        waiting = f"{max(waits):.0f}" if waits else "-"
        repeats = ", ".join(str(x.repeat) for x in xs)
        word = "repeats" if len(xs) > 1 else "repeat"
        lines.append(
            f"{target} at {label} ({word} {repeats}): KV usage up to {usage:.2f}, up to "
            f"{waiting} requests waiting: {MEANING}"
        )
    return lines


#: an open-loop run whose engine read requests waiting in this many samples in a row,
#: spanning ``QUEUED_FOR_S`` or more (a wait past any one scheduling step), queued them
QUEUED_IN_A_ROW = 2
#: the least time from the first to the last sample of such a row: the gauges are read
#: about once a second by default (``scrape_interval_s``), so two samples in a row; at a
#: shorter interval, more (0.9 s: one second less the sampler's jitter)
QUEUED_FOR_S = 0.9
#: what a queued level means, said wherever one is shown
QUEUED_MEANING = (
    "requests waited to be admitted while arrivals kept coming (the engine's "
    "running-request limit, or KV room it keeps for tokens still to generate, held them "
    "back), so TTFT there counts that wait"
)


@dataclass(frozen=True)
class Queue:
    """The requests one run's engine kept waiting, and what ran beside them."""

    waiting_series: str
    #: the most requests read waiting
    peak_waiting: float
    #: the most samples in a row that read a request or more waiting, and the longest
    #: time such a row spanned (its first sample to its last)
    longest: int
    longest_s: float
    #: samples with a waiting reading, and of those, reading a request or more
    samples: int
    waiting_samples: int
    running_series: str | None
    #: the most requests read running in a sample with requests waiting; None: no reading
    peak_running: float | None
    usage_series: str | None
    #: the highest KV usage read in a sample with requests waiting; None: no reading
    peak_usage: float | None

    @property
    def queued(self) -> bool:
        """Requests waited ``QUEUED_IN_A_ROW`` samples in a row or more, over
        ``QUEUED_FOR_S`` or more."""
        return self.longest >= QUEUED_IN_A_ROW and self.longest_s >= QUEUED_FOR_S


def queue_reading(samples: Sequence[ServerMetricsSample] | None) -> Queue | None:
    """The run's waiting requests; ``None`` without a reading of a waiting gauge."""
    if not samples:
        return None
    triple = _first_read(registry.queue_series(), samples)
    if triple is None:
        return None
    waiting_series, running_series, usage_series = triple
    peak = longest_s = 0.0
    n = waiting_n = longest = row = 0
    row_start = 0.0
    running: list[float] = []
    usages: list[float] = []
    for s in samples:
        waiting = s.values.get(waiting_series)
        if waiting is None:
            row = 0
            continue
        n += 1
        if waiting <= 0:
            row = 0
            continue
        waiting_n += 1
        if row == 0:
            row_start = s.t_s
        row += 1
        longest = max(longest, row)
        longest_s = max(longest_s, s.t_s - row_start)
        peak = max(peak, waiting)
        r = s.values.get(running_series) if running_series is not None else None
        u = s.values.get(usage_series) if usage_series is not None else None
        if r is not None:
            running.append(r)
        if u is not None:
            usages.append(u)
    return Queue(
        waiting_series=waiting_series,
        peak_waiting=peak,
        longest=longest,
        longest_s=longest_s,
        samples=n,
        waiting_samples=waiting_n,
        running_series=running_series,
        peak_running=max(running) if running else None,
        usage_series=usage_series,
        peak_usage=max(usages) if usages else None,
    )


@dataclass(frozen=True)
class QueuedRun:
    """One open-loop run whose engine kept requests waiting (:attr:`Queue.queued`)."""

    target: str
    label: str  # its level: ``rate=20``
    level: float
    repeat: int
    queue: Queue
    #: the engine's running-request limit as it ran (``parallel_slots`` of the target's
    #: effective settings); None where unknown
    limit: int | None


def queued_runs(sweep: SweepFile, targets: Sequence[str] | None = None) -> list[QueuedRun]:
    """The sweep's valid open-loop runs (of ``targets``, when given) whose engine queued
    requests, less those said otherwise (overloaded, or KV full), in the sweep's target
    order, then by level and repeat."""
    rank = sweep.target_rank()
    limits = {t.name: _limit(t.settings.get("parallel_slots")) for t in sweep.targets}
    out: list[tuple[tuple[int, float, int], QueuedRun]] = []
    for r in sweep.runs:
        if targets is not None and r.target not in targets:
            continue
        if r.axis != "rate" or not r.is_valid or r.overloaded:
            continue
        found = queue_reading(r.server_metrics)
        if found is None or not found.queued:
            continue
        full = kv_pressure(r.server_metrics)
        if full is not None and full.full:
            continue
        run = QueuedRun(
            r.target, level_label(r.axis, r.level), r.level, r.repeat, found,
            limits.get(r.target),
        )  # fmt: skip
        out.append(((rank(r.target), r.level, r.repeat), run))
    return [x for _, x in sorted(out, key=lambda kx: kx[0])]


def _limit(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


#: what a closed-loop level above the engine's slots means, said wherever one is shown
ABOVE_SLOTS_MEANING = (
    "the requests beyond them waited in the engine's queue (a closed loop keeps it full), "
    "so TTFT there counts that wait and throughput is the slots'"
)


@dataclass(frozen=True)
class AboveSlots:
    """A target's closed-loop levels above the requests its engines ran at once."""

    target: str
    #: ``parallel_slots`` as the engine ran (its effective settings), times its replicas
    slots: int
    levels: tuple[float, ...]
    #: the most requests its waiting gauge read in those levels' runs; None: no reading
    peak_waiting: float | None


def above_slots(sweep: SweepFile, targets: Sequence[str] | None = None) -> list[AboveSlots]:
    """The targets (of ``targets``, when given) with valid closed-loop runs at levels
    above their slots, in the sweep's target order. A target whose slots its settings do
    not give (a URL target, an engine that does not say) has none."""
    out: list[tuple[int, AboveSlots]] = []
    rank = sweep.target_rank()
    for t in sweep.targets:
        if targets is not None and t.name not in targets:
            continue
        slots = _limit(t.settings.get("parallel_slots"))
        if slots is None:
            continue
        slots *= _limit(t.settings.get("replicas")) or 1
        runs = [
            r
            for r in sweep.runs
            if r.target == t.name and r.axis == "concurrency" and r.is_valid and r.level > slots
        ]
        if not runs:
            continue
        peaks = [q.peak_waiting for r in runs if (q := queue_reading(r.server_metrics))]
        found = AboveSlots(
            t.name, slots, tuple(sorted({r.level for r in runs})), max(peaks) if peaks else None
        )
        out.append((rank(t.name), found))
    return [x for _, x in sorted(out, key=lambda p: p[0])]


def format_above_slots(found: Sequence[AboveSlots]) -> list[str]:
    """One line per target: its levels above its slots, the most requests read waiting
    there, and what it means."""
    lines = []
    for x in found:
        levels = ", ".join(level_label("concurrency", c) for c in x.levels)
        waited = (
            f", up to {x.peak_waiting:.0f} requests read waiting"
            if x.peak_waiting is not None
            else ""
        )
        lines.append(
            f"{x.target} at {levels}, above the {x.slots} requests it ran at once{waited}: "
            f"{ABOVE_SLOTS_MEANING}"
        )
    return lines


def format_queued(runs: Sequence[QueuedRun]) -> list[str]:
    """One line per target and level among ``runs``: its repeats, the most requests
    waiting and for how long, what ran beside them (against the engine's limit where
    known) and the KV usage then, and what it means."""
    groups: dict[tuple[str, str], list[QueuedRun]] = {}
    for x in runs:
        groups.setdefault((x.target, x.label), []).append(x)
    lines = []
    for (target, label), xs in groups.items():
        waiting = max(x.queue.peak_waiting for x in xs)
        row = max(x.queue.longest for x in xs)
        running = [x.queue.peak_running for x in xs if x.queue.peak_running is not None]
        usage = [x.queue.peak_usage for x in xs if x.queue.peak_usage is not None]
        limit = next((x.limit for x in xs if x.limit is not None), None)
        beside = []
        if running:
            ran = f"up to {max(running):.0f} running"
            beside.append(ran + (f" of its {limit} slots" if limit is not None else ""))
        if usage:
            beside.append(f"KV usage up to {max(usage):.2f}")
        with_ = f", {' at '.join(beside)}" if beside else ""
        repeats = ", ".join(str(x.repeat) for x in xs)
        word = "repeats" if len(xs) > 1 else "repeat"
        lines.append(
            f"{target} at {label} ({word} {repeats}): up to {waiting:.0f} requests waiting "
            f"(up to {row} samples in a row){with_}: {QUEUED_MEANING}"
        )
    return lines
