"""Timing bounds the tests share: what a figure may be, given the server's stamps."""

from __future__ import annotations

from typing import Any


def stamped_bounds(records: list[Any]) -> tuple[list[float], list[float], float, float]:
    """What TPOT and ITL may be, given the server's stamps, on a noisy machine.

    Each record's chunks carry the server's ``crossover_emit_ns`` (the client's clock), so
    its last-minus-first arrival is the server's own span moved by the delivery delay of
    the first and last chunk, both measured here (arrival less emission, never negative).
    Returns per-record TPOT bounds (``lo``, ``hi``: compare medians, which keep their
    order) and the pooled ITL mean's bounds. The time per token divides by the tokens
    after the first delivery (events within ``DELIVERY_GAP_NS`` of the one before are
    one; ITL stamps a delivery with its last event), one token per chunk here.
    """
    from crossover.metrics.requests import DELIVERY_GAP_NS

    tpot_lo, tpot_hi = [], []
    gap_lo = gap_hi = 0.0
    gap_tokens = 0
    for r in records:
        a, e = r.chunk_arrival_ns, r.chunk_emitted_ns
        assert e is not None and len(e) == len(a) >= 2
        d = [x - y for x, y in zip(a, e, strict=True)]
        assert min(d) >= 0, "a chunk arrived before the server wrote it: not one clock"
        k = 1
        while k < len(a) and a[k] - a[k - 1] < DELIVERY_GAP_NS:
            k += 1
        if k == len(a):
            continue  # all in one delivery: no time per token
        span = e[-1] - e[0]
        lo, hi = span - d[0], span + d[-1]
        tpot_lo.append(lo / (len(a) - k) / 1e6)
        tpot_hi.append(hi / (len(a) - k) / 1e6)
        gap_lo += (lo - (k - 1) * DELIVERY_GAP_NS) / 1e6
        gap_hi += hi / 1e6
        gap_tokens += len(a) - k
    return tpot_lo, tpot_hi, gap_lo / gap_tokens, gap_hi / gap_tokens
