"""Live counters and ground truth: what the server actually emitted, and when.

``GET /metrics`` renders the counters in Prometheus text format; ``GET /calibration/truth``
returns the per-request records, so a client's measurement error can be computed.
"""

from __future__ import annotations

import bisect
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from crossover.calibration.tokenizer import Vocabulary

# upper bounds of the emission-lag histogram, milliseconds
LAG_BUCKETS_MS: tuple[float, ...] = (
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 1000.0,
)  # fmt: skip


@dataclass(slots=True)
class LagStats:
    """Emission lag: how late each chunk left against its scheduled deadline."""

    count: int = 0
    sum_ns: int = 0
    max_ns: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LAG_BUCKETS_MS) + 1))

    def add(self, lag_ns: int) -> None:
        lag_ns = max(lag_ns, 0)
        self.count += 1
        self.sum_ns += lag_ns
        if lag_ns > self.max_ns:
            self.max_ns = lag_ns
        self.buckets[bisect.bisect_left(LAG_BUCKETS_MS, lag_ns / 1e6)] += 1

    def quantile_upper_ms(self, q: float) -> float | None:
        """Upper bound of the bucket holding quantile ``q`` (None when empty)."""
        if not self.count:
            return None
        target = q * self.count
        seen = 0
        for i, n in enumerate(self.buckets):
            seen += n
            if seen >= target and n:
                return LAG_BUCKETS_MS[i] if i < len(LAG_BUCKETS_MS) else self.max_ns / 1e6
        return self.max_ns / 1e6

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "mean": self.sum_ns / self.count / 1e6 if self.count else None,
            "max": self.max_ns / 1e6 if self.count else None,
            "p50_upper": self.quantile_upper_ms(0.5),
            "p99_upper": self.quantile_upper_ms(0.99),
            "buckets_le_ms": {
                **{str(b): n for b, n in zip(LAG_BUCKETS_MS, self.buckets, strict=False)},
                "inf": self.buckets[-1],
            },
        }


@dataclass(slots=True)
class RequestTruth:
    """One generation request as the server executed it (times: perf_counter_ns)."""

    index: int
    id: str
    endpoint: str
    stream: bool
    faults: list[str]
    arrival_ns: int
    prompt_tokens: int | None = None
    #: prompt tokens served from the prefix cache (None: the server keeps none)
    cached_tokens: int | None = None
    max_tokens: int | None = None
    status: int = 200
    tokens_sent: int = 0
    chunks_sent: int = 0
    finish_reason: str | None = None
    first_deadline_ns: int | None = None
    first_emit_ns: int | None = None
    last_deadline_ns: int | None = None
    last_emit_ns: int | None = None
    max_lag_ns: int = 0
    client_disconnected: bool = False
    done: bool = False

    def as_dict(self) -> dict[str, Any]:
        gaps = self.tokens_sent - 1
        configured_gap = emitted_gap = None
        if gaps >= 1 and self.first_deadline_ns is not None and self.last_deadline_ns is not None:
            configured_gap = (self.last_deadline_ns - self.first_deadline_ns) / gaps / 1e6
        if gaps >= 1 and self.first_emit_ns is not None and self.last_emit_ns is not None:
            emitted_gap = (self.last_emit_ns - self.first_emit_ns) / gaps / 1e6
        return {
            "index": self.index,
            "id": self.id,
            "endpoint": self.endpoint,
            "stream": self.stream,
            "faults": self.faults,
            "status": self.status,
            "prompt_tokens": self.prompt_tokens,
            "max_tokens": self.max_tokens,
            "tokens_sent": self.tokens_sent,
            "chunks_sent": self.chunks_sent,
            "finish_reason": self.finish_reason,
            "arrival_ns": self.arrival_ns,
            "first_emit_ns": self.first_emit_ns,
            "last_emit_ns": self.last_emit_ns,
            "configured_ttft_ms": _ms(self.first_deadline_ns, self.arrival_ns),
            "emitted_ttft_ms": _ms(self.first_emit_ns, self.arrival_ns),
            "configured_gap_ms": configured_gap,
            "emitted_gap_ms": emitted_gap,
            "gap_count": max(gaps, 0),
            "max_lag_ms": self.max_lag_ns / 1e6,
            "client_disconnected": self.client_disconnected,
            "done": self.done,
        }


def _ms(t_ns: int | None, t0_ns: int) -> float | None:
    return None if t_ns is None else (t_ns - t0_ns) / 1e6


class ServerState:
    """Everything the server counts while it runs; one per application."""

    def __init__(self, truth_max_requests: int) -> None:
        self.next_index = 0
        self.waiting = 0  # accepted, first token not yet sent
        self.running = 0  # first token sent, still generating
        self.requests_total = 0
        self.errors_total = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        #: when the generation counter began (prometheus_client's ``_created``): a
        #: ``counter_reset`` starts it again from 0 with a new one
        self.generation_created = time.time()
        #: tokens of another model the same server serves (``other_model_tokens``): its
        #: own series of the counter, never this run's work
        self.other_model_tokens = 0
        self.lag = LagStats()  # every chunk
        self.first_lag = LagStats()  # first-token chunks (arrival bursts show here)
        self.later_lag = LagStats()  # the rest: the decode schedule
        self.peak_in_flight = 0
        self.truth: deque[RequestTruth] = deque(maxlen=truth_max_requests)
        self.vocabulary = Vocabulary()  # for /detokenize; kept across resets

    @property
    def active(self) -> int:
        return self.waiting + self.running

    def add_lag(self, lag_ns: int, first: bool) -> None:
        self.lag.add(lag_ns)
        (self.first_lag if first else self.later_lag).add(lag_ns)

    def admit(self) -> None:
        """A generation request starts waiting for its first token."""
        self.waiting += 1
        self.peak_in_flight = max(self.peak_in_flight, self.waiting + self.running)

    def start(
        self, endpoint: str, stream: bool, faults: list[str], arrival_ns: int
    ) -> RequestTruth:
        index = self.next_index
        self.next_index += 1
        self.requests_total += 1
        rec = RequestTruth(
            index=index,
            id=f"cmpl-calib-{index}",
            endpoint=endpoint,
            stream=stream,
            faults=faults,
            arrival_ns=arrival_ns,
        )
        if self.truth.maxlen:
            self.truth.append(rec)
        return rec

    def reset(self) -> None:
        """Forget history (request counter included, so fault selection starts over)."""
        self.next_index = 0
        self.requests_total = self.errors_total = 0
        self.prompt_tokens_total = self.generation_tokens_total = 0
        self.lag, self.first_lag, self.later_lag = LagStats(), LagStats(), LagStats()
        self.peak_in_flight = self.active
        self.truth.clear()

    def truth_dict(self) -> dict[str, Any]:
        return {
            "schema": "crossover.calibration.truth/1",
            "pid": os.getpid(),
            "requests": [r.as_dict() for r in self.truth],
            "emission_lag_ms": self.lag.as_dict(),
            "first_chunk_lag_ms": self.first_lag.as_dict(),
            "later_chunk_lag_ms": self.later_lag.as_dict(),
            "requests_total": self.requests_total,
            "in_flight": self.active,
            "peak_in_flight": self.peak_in_flight,
        }

    def prometheus_text(self, model: str) -> str:
        escaped = model.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        label = f'{{model_name="{escaped}"}}'
        lines = [
            "# HELP calibration:num_requests_running Requests past their first token.",
            "# TYPE calibration:num_requests_running gauge",
            f"calibration:num_requests_running{label} {self.running}",
            "# HELP calibration:num_requests_waiting Requests before their first token.",
            "# TYPE calibration:num_requests_waiting gauge",
            f"calibration:num_requests_waiting{label} {self.waiting}",
            "# HELP calibration:generation_tokens_total Tokens generated (sent).",
            "# TYPE calibration:generation_tokens_total counter",
            f"calibration:generation_tokens_total{label} {self.generation_tokens_total}",
            f"calibration:generation_tokens_created{label} {self.generation_created}",
            *(
                [
                    'calibration:generation_tokens_total{model_name="other-model"} '
                    f"{self.other_model_tokens}"
                ]
                if self.other_model_tokens
                else []
            ),
            "# HELP calibration:prompt_tokens_total Prompt tokens received.",
            "# TYPE calibration:prompt_tokens_total counter",
            f"calibration:prompt_tokens_total{label} {self.prompt_tokens_total}",
            "# HELP calibration:requests_total Generation requests received.",
            "# TYPE calibration:requests_total counter",
            f"calibration:requests_total{label} {self.requests_total}",
            "# HELP calibration:emission_lag_seconds Chunk emission time minus its deadline.",
            "# TYPE calibration:emission_lag_seconds histogram",
        ]
        cumulative = 0
        for bound, n in zip(LAG_BUCKETS_MS, self.lag.buckets, strict=False):
            cumulative += n
            lines.append(
                f'calibration:emission_lag_seconds_bucket{{le="{bound / 1e3:g}"}} {cumulative}'
            )
        lines.append(f'calibration:emission_lag_seconds_bucket{{le="+Inf"}} {self.lag.count}')
        lines.append(f"calibration:emission_lag_seconds_sum {self.lag.sum_ns / 1e9}")
        lines.append(f"calibration:emission_lag_seconds_count {self.lag.count}")
        return "\n".join(lines) + "\n"
