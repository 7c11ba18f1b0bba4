"""Per-request metrics from one raw record (docs/metrics.md, "Per request").

All results are milliseconds; a metric with no value is ``None``, never 0.

Timing is by **delivery**: token-carrying events that arrived together (in one read,
or within ``DELIVERY_GAP_NS`` of the one before) are one delivery, because the client
saw them at one moment and cannot tell when each was generated. ITL spreads each
delivery's gap over the tokens it brought (as for one chunk carrying several tokens),
and TPOT divides the time after the first delivery by the tokens that came after it.
``chunk_gap_ms`` keeps the raw gaps between events, zeros included.
"""

from __future__ import annotations

import numpy as np

from crossover.records.model import RequestRecord

NS_PER_MS = 1_000_000.0
#: events of one stream this close arrived as one delivery: no engine streams tokens of
#: one request 10,000 a second, and a read loop that wakes within a burst splits it at
#: random (a buffering proxy's burst read in two reads is still one burst)
DELIVERY_GAP_NS = 100_000


def ttft_ms(r: RequestRecord) -> float | None:
    if r.t_first_ns is None:
        return None
    return (r.t_first_ns - r.t_send_ns) / NS_PER_MS


def queue_ms(r: RequestRecord) -> float | None:
    if r.t_scheduled_ns is None:
        return None
    return (r.t_send_ns - r.t_scheduled_ns) / NS_PER_MS


def e2e_ms(r: RequestRecord) -> float | None:
    if r.t_done_ns is None or not r.ok:
        return None
    return (r.t_done_ns - r.t_send_ns) / NS_PER_MS


def tpot_ms(r: RequestRecord) -> float | None:
    """``(t_last - t_first) / (N - k)``: N the counted completion tokens, k the tokens of
    the first delivery (1 when the first token came alone, as it does from an engine
    that streams; more when a buffering server or proxy held it back with the next).
    Where the tokens per event are an estimate (spread by text), k counts the first
    delivery's events, one token each."""
    n = r.completion_tokens
    if n is None or n < 2 or r.t_first_ns is None or r.t_last_ns is None or not r.ok:
        return None
    a = r.chunk_arrival_ns
    first = 1
    while first < len(a) and a[first] - a[first - 1] < DELIVERY_GAP_NS:
        first += 1
    exact = r.chunk_tokens is not None and len(r.chunk_tokens) == len(a)
    k = sum((r.chunk_tokens or [])[:first]) if exact else first
    if n - k < 1:
        return None  # every token came in the first delivery: no time per token to see
    return (r.t_last_ns - r.t_first_ns) / (n - k) / NS_PER_MS


def tokens_per_chunk(r: RequestRecord) -> list[int] | None:
    """Tokens carried by each token-carrying chunk.

    Exact when the server said so per chunk, or when the count equals the number
    of chunks. Otherwise (several tokens per chunk) the counted total is spread
    over the chunks in proportion to their text, at least one each. ``None`` when
    the total is unknown: chunks are never taken for tokens.
    """
    n_chunks = len(r.chunk_arrival_ns)
    if r.chunk_tokens is not None and len(r.chunk_tokens) == n_chunks:
        return list(r.chunk_tokens)
    total = r.completion_tokens
    if total is None or n_chunks == 0:
        return None
    if total == n_chunks:
        return [1] * n_chunks
    if total < n_chunks:
        return None  # the count contradicts the stream: usage_mismatch says so
    chars = np.asarray(r.chunk_chars, dtype=np.int64)
    char_total = int(chars.sum())
    if char_total <= 0:
        shares = np.full(n_chunks, total / n_chunks)
    else:
        shares = total * chars / char_total  # int64 and float64 exact below 2**53: as Python
    alloc = np.maximum(1, shares.astype(np.int64))  # truncated, as int()
    over = int(alloc.sum()) - total
    if over > 0:  # the at-least-one floor overshot: take from the largest
        _take_from_largest(alloc, over)
    left = total - int(alloc.sum())
    if left > 0:  # the largest remainders first, the first of equals first
        alloc[np.argsort(alloc - shares, kind="stable")[:left]] += 1
    out: list[int] = alloc.tolist()  # Python ints
    return out


def _take_from_largest(alloc: np.ndarray, over: int) -> None:
    """Take ``over`` from ``alloc`` one at a time, each from the largest (the first of
    equals), at once: every value above a level ``L`` comes down to it, and what is left
    to take comes from the first values at ``L``, one each (``over`` is less than the
    sum of the values less one each)."""

    def above(level: int) -> int:
        return int(np.maximum(alloc - level, 0).sum())

    lo, hi = 0, int(alloc.max())  # the lowest level whose taking is within ``over``
    while lo < hi:
        mid = (lo + hi) // 2
        if above(mid) <= over:
            hi = mid
        else:
            lo = mid + 1
    rest = over - above(lo)
    np.minimum(alloc, lo, out=alloc)
    if rest:
        alloc[np.flatnonzero(alloc == lo)[:rest]] -= 1


def chunk_gaps_ms(r: RequestRecord) -> list[float]:
    a = r.chunk_arrival_ns
    return [(a[i] - a[i - 1]) / NS_PER_MS for i in range(1, len(a))]


def deliveries(r: RequestRecord) -> list[tuple[int, int]]:
    """``(arrival, tokens)`` of each delivery: the token-carrying events that arrived
    together (within ``DELIVERY_GAP_NS`` of the one before) taken as one, stamped with
    the last one's arrival. One token per event where the count is unknown."""
    a = r.chunk_arrival_ns
    if not a:
        return []
    counts = tokens_per_chunk(r) or [1] * len(a)
    out = [(a[0], counts[0])]
    for i in range(1, len(a)):
        if a[i] - a[i - 1] < DELIVERY_GAP_NS:
            out[-1] = (a[i], out[-1][1] + counts[i])
        else:
            out.append((a[i], counts[i]))
    return out


def grouped_events(r: RequestRecord) -> int:
    """Token-carrying events that arrived in the same delivery as the one before."""
    a = r.chunk_arrival_ns
    return sum(1 for i in range(1, len(a)) if a[i] - a[i - 1] < DELIVERY_GAP_NS)


def itl_ms(r: RequestRecord) -> list[float]:
    """Per-token gaps: each delivery's gap after the first, spread over the tokens it
    brought, once per token (so pooled ITL weights every token equally)."""
    counts = tokens_per_chunk(r) if r.ok else None
    a = r.chunk_arrival_ns
    if counts is None or not a:
        return []
    if len(counts) != len(a):  # text lengths not one per chunk (a damaged record)
        return _itl_by_delivery(deliveries(r))
    # the deliveries (``deliveries``), at once: each starts where the gap before it is
    # wide, and ends at the arrival before the next one starts
    arr = np.asarray(a, dtype=np.int64)
    starts = np.flatnonzero(np.diff(arr) >= DELIVERY_GAP_NS) + 1
    stamps = arr[np.append(starts - 1, len(arr) - 1)]
    tokens = np.add.reduceat(np.asarray(counts, dtype=np.int64), np.insert(starts, 0, 0))
    gaps, k = np.diff(stamps), tokens[1:]
    brought = k > 0
    per = gaps[brought] / k[brought] / NS_PER_MS  # as Python's: every operand exact
    out: list[float] = np.repeat(per, k[brought]).tolist()
    return out


def _itl_by_delivery(groups: list[tuple[int, int]]) -> list[float]:
    out: list[float] = []
    for i in range(1, len(groups)):
        k = groups[i][1]
        if k <= 0:
            continue
        per = (groups[i][0] - groups[i - 1][0]) / k / NS_PER_MS
        out.extend([per] * k)
    return out
