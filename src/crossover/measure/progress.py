"""A run's live counters for the progress display (:class:`Progress`), updated as its
records arrive."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from crossover.records.model import RequestRecord


@dataclass
class Progress:
    """Live counters for the progress display; updated as records arrive."""

    total: int | None
    #: measured requests handed to the transport so far (single-process loads)
    sent: int = 0
    done: int = 0
    failed: int = 0
    warmup_done: int = 0
    warmup_failed: int = 0
    output_chars: int = 0
    output_tokens: int = 0
    started_ns: int = field(default_factory=time.perf_counter_ns)
    ttfts_ms: list[float] = field(default_factory=list)
    #: called with every record as it arrives (``crossover decide``'s sequential stop)
    listener: Callable[[RequestRecord], None] | None = None

    def update(self, r: RequestRecord) -> None:
        if self.listener is not None:
            self.listener(r)
        if r.warmup:
            self.warmup_done += 1
            self.warmup_failed += 0 if r.ok else 1
            return
        if r.ok:
            self.done += 1
            self.output_tokens += r.completion_tokens or len(r.chunk_arrival_ns)
            if r.t_first_ns is not None:
                self.ttfts_ms.append((r.t_first_ns - r.t_send_ns) / 1e6)
        else:
            self.failed += 1

    @property
    def in_flight(self) -> int:
        """Measured requests sent and not finished (0 where ``sent`` is not counted)."""
        return max(0, self.sent - self.done - self.failed)

    @property
    def tokens_per_s(self) -> float:
        dt = (time.perf_counter_ns() - self.started_ns) / 1e9
        return self.output_tokens / dt if dt > 0 else 0.0

    @property
    def ttft_p50_ms(self) -> float | None:
        if not self.ttfts_ms:
            return None
        s = sorted(self.ttfts_ms[-2000:])
        return s[len(s) // 2]
